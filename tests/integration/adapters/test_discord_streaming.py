"""Streamed replies on Discord through the real pipeline: drafts grow by edits, end formatted.

The fake provider streams its answer over SSE at a set pace; the fake Discord records every
post and edit of the bot's messages and what each message shows now, and enforces Discord's
per-channel buckets (5 posts and 5 edits per 5 s), so a reply streamed too fast shows as 429s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.base import DRAFT_MARK
from adapters.discord.chunks import render_chunks
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.outbox import recorded_drafts, reply_outcome
from tests.fixtures.platform_servers.discord import (
    DM_ID,
    MESSAGE_LIMIT,
    Failure,
    FakeDiscord,
    load_payload,
)
from tests.fixtures.platform_servers.faults import AfterPost
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    settings_from_env,
    start_worker,
    wait_until,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

REPLY = (
    "Here is the **plan** for the week, step by step:\n\n"
    + " ".join(f"word{n}" for n in range(120))
    + "\n\n```python\nprint('done')\n```"
)
LONG_REPLY = " ".join(f"paragraph{n // 40}word{n}" for n in range(260))
"""About 4,600 characters: three messages of at most 2,000."""


def _env(db_url: str, home: Path, llm: FakeLLM, fake: FakeDiscord, **extra: Any) -> dict[str, str]:
    return hubbub_env(
        db_url=db_url,
        home=home,
        fake=llm,
        discord_token=fake.token,
        discord_api_base=fake.base_url,
        **extra,
    )


def _start(
    gateway_factory: Callable[..., GatewayServer], env: dict[str, str], fake: FakeDiscord
) -> GatewayServer:
    gateway = gateway_factory(settings_from_env(env))
    wait_until(fake.connected, timeout=60, what="the gateway's Discord connection")
    return gateway


def _ask(fake: FakeDiscord) -> None:
    fake.push("MESSAGE_CREATE", load_payload("message_create_private"))


def _finished(fake: FakeDiscord, final: list[str]) -> list[str] | None:
    shown = fake.shown(DM_ID)
    return shown if shown[-len(final) :] == final else None


def _assert_clean_edits(fake: FakeDiscord) -> list[dict[str, Any]]:
    """Every edit went through and changed its message; none empty or over the limit."""
    edits = [e for e in fake.edits if e["channel_id"] == DM_ID]
    assert all(e["ok"] for e in edits), "an edit was refused"
    before: dict[str, str] = {m.message["id"]: m.content for m in fake.sent_messages(DM_ID)}
    for edit in edits:
        assert edit["content"].strip()
        assert len(edit["content"]) <= MESSAGE_LIMIT
        assert edit["content"] != before[edit["message_id"]], "an edit that changed nothing"
        before[edit["message_id"]] = edit["content"]
    return edits


def _draft_text(content: str) -> str:
    assert content.endswith(DRAFT_MARK), "a draft says it is still being written"
    return content.removesuffix(DRAFT_MARK)


def test_a_streamed_reply_grows_by_edits_and_ends_formatted(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    env = _env(sqlite_url, tmp_path, fake_llm, fake, streaming="on")
    _start(gateway_factory, env, fake)
    final = render_chunks(REPLY)
    _ask(fake)

    shown = wait_until(lambda: _finished(fake, final), timeout=90, what="the final edit")

    assert shown == final, "one message, the final text"
    (draft,) = fake.sent_messages(DM_ID)
    edits = _assert_clean_edits(fake)
    assert len(edits) >= 3, "the reply grew by edits"
    growing = [_draft_text(e["content"]) for e in edits[:-1]]
    assert all(REPLY.startswith(text) for text in [_draft_text(draft.content), *growing])
    assert [e["content"] for e in edits].count(final[0]) == 1, "the final text exactly once"
    assert edits[-1]["content"] == final[0]
    assert fake.flood.refused == 0, "the default interval stays inside Discord's bucket"


def test_a_reply_past_the_limit_continues_in_the_next_message(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(LONG_REPLY))
    env = _env(
        sqlite_url, tmp_path, fake_llm, fake, streaming="on", stream_edit_interval_discord="1.0"
    )
    _start(gateway_factory, env, fake)
    final = render_chunks(LONG_REPLY)
    assert len(final) == 3
    _ask(fake)

    shown = wait_until(lambda: _finished(fake, final), timeout=90, what="the final edits")

    assert shown == final, "the drafts became the reply's messages, nothing more"
    assert len(fake.sent_messages(DM_ID)) == 3, "each message posted once"
    edits = _assert_clean_edits(fake)
    for index, message in enumerate(fake.sent_messages(DM_ID)):
        mine = [e["content"] for e in edits if e["message_id"] == message.message["id"]]
        texts = [message.content, *mine]
        assert texts.count(final[index]) == 1, "each message's final text exactly once"
        assert all(text == final[index] or text.endswith(DRAFT_MARK) for text in texts)
    assert any(DRAFT_MARK in m.content for m in fake.sent_messages(DM_ID)[1:]), (
        "the reply continued in a next draft while it was written"
    )


def test_streaming_off_posts_one_message_as_today(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    env = _env(sqlite_url, tmp_path, fake_llm, fake, streaming="off")
    _start(gateway_factory, env, fake)
    _ask(fake)

    (sent,) = wait_until(lambda: fake.sent_messages(DM_ID), timeout=90, what="the reply")

    assert sent.content == render_chunks(REPLY)[0]
    assert fake.edits == []
    assert fake_llm.chat_requests()[0].get("stream") is None


def test_a_worker_killed_mid_stream_ends_with_one_message(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    fake_llm.stream_tokens_per_second = 8
    fake_llm.reply = lambda body: REPLY
    env = _env(
        postgres_url,
        tmp_path,
        fake_llm,
        fake,
        redis_url=redis_url,
        streaming="on",
        stream_edit_interval_discord="0.3",
    )
    _start(gateway_factory, env, fake)
    victim = start_worker(env, concurrency=1)
    processes.append(victim)
    final = render_chunks(REPLY)
    _ask(fake)
    wait_until(lambda: [e for e in fake.edits if e["ok"]], timeout=90, what="the first edit")
    victim.kill()
    fake_llm.stream_tokens_per_second = 80  # the heir's call only has to finish
    heir = start_worker(env, concurrency=1)
    processes.append(heir)

    shown = wait_until(lambda: _finished(fake, final), timeout=120, what="the final edit")

    assert shown == final
    assert len(fake.sent_messages(DM_ID)) == 1, "the draft was edited, not posted again"
    assert len(fake_llm.chat_requests()) == 2, "the turn ran again"
    assert all(e["ok"] for e in fake.edits)


def test_a_draft_post_whose_answer_was_lost_is_settled_by_its_nonce(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    fake.after_next(AfterPost.drop_connection())
    env = _env(sqlite_url, tmp_path, fake_llm, fake, streaming="on")
    gateway = _start(gateway_factory, env, fake)
    final = render_chunks(REPLY)
    _ask(fake)

    shown = wait_until(lambda: _finished(fake, final), timeout=90, what="the final edit")

    assert shown == final, "the draft the lost answer created became the reply"
    assert len(fake.sent_messages(DM_ID)) == 1
    assert len([a for a in fake.attempts if a["channel_id"] == DM_ID]) >= 2, "posted again"
    assert reply_outcome(gateway.runtime.factory) == "sent"


def test_a_draft_post_that_cannot_be_settled_is_marked_never_doubled(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    fake.after_next(AfterPost.drop_connection())
    posts: list[dict[str, Any]] = []

    def second_post_fails(body: dict[str, Any]) -> Failure | None:
        posts.append(body)
        return Failure.unavailable() if len(posts) == 2 else None

    fake.fail_when = second_post_fails
    env = _env(sqlite_url, tmp_path, fake_llm, fake, streaming="on")
    gateway = _start(gateway_factory, env, fake)
    _ask(fake)

    state = reply_outcome(gateway.runtime.factory)

    assert state == "unknown", "the draft may exist and could not be settled: marked"
    (draft,) = fake.sent_messages(DM_ID)
    assert REPLY.startswith(_draft_text(draft.content))
    assert len(posts) == 2, "posted once more only with the same nonce, then never again"
    assert posts[0]["nonce"] == posts[1]["nonce"]
    assert fake.edits == []


def test_a_draft_deleted_mid_stream_is_replaced_with_the_rest_of_the_reply(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake: FakeDiscord,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    resume = threading.Event()
    fake_llm.queue_replies(ScriptedReply(LONG_REPLY, pause_after=240, resume=resume))
    env = _env(
        sqlite_url, tmp_path, fake_llm, fake, streaming="on", stream_edit_interval_discord="1.0"
    )
    gateway = _start(gateway_factory, env, fake)
    final = render_chunks(LONG_REPLY)
    _ask(fake)
    first, _ = wait_until(
        lambda: len(fake.sent_messages(DM_ID)) >= 2 and fake.sent_messages(DM_ID)[:2],
        timeout=90,
        what="two drafts",
    )
    fake.delete(first.message["id"])
    resume.set()

    state = reply_outcome(gateway.runtime.factory)

    assert state == "sent"
    assert fake.shown(DM_ID) == final, "one complete reply: the rest of it posted anew"
    sent = fake.sent_messages(DM_ID)
    drafts, posted = sent[: -len(final)], sent[-len(final) :]
    assert all(m.content.endswith(DRAFT_MARK) for m in drafts)
    assert [m.content for m in posted] == final, "each message of it posted once"
    assert all(m.message["id"] in fake.deleted for m in drafts), "every draft went"
    assert recorded_drafts(gateway.runtime.factory) == [posted[0].message["id"]], (
        "the new one is recorded"
    )
