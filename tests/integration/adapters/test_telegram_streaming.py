"""Streamed replies on Telegram through the real pipeline: drafts grow by edits, end formatted.

The fake provider streams its answer over SSE at a set pace; the fake Bot API keeps every
message's current text and refuses edits that change nothing, so a no-op edit would show
as a failed call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.chunks import render_chunks
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.outbox import recorded_drafts, reply_outcome
from tests.fixtures.platform_servers.faults import AfterPost
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramServerThread,
    utf16_length,
)
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    settings_from_env,
    start_worker,
    wait_until,
)
from tests.integration.adapters.test_telegram_gateway import payload, retarget

pytestmark = pytest.mark.integration

REPLY = (
    "Here is the **plan** for the week, step by step:\n\n"
    + " ".join(f"word{n}" for n in range(60))
    + "\n\n```python\nprint('done')\n```"
)
FINAL = render_chunks(REPLY)[0]


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


def _env(db_url: str, home: Path, llm: FakeLLM, fake: FakeTelegram, **extra: Any) -> dict[str, str]:
    return hubbub_env(
        db_url=db_url,
        home=home,
        fake=llm,
        telegram_token=TOKEN,
        telegram_api_base=fake.api_base,
        **extra,
    )


def _finished(telegram: FakeTelegram, chat: int) -> list[str] | None:
    shown = telegram.messages(chat)
    return shown if shown and shown[-1] == telegram_visible(FINAL.html) else None


def telegram_visible(html: str) -> str:
    from tests.fixtures.platform_servers.telegram import parse_telegram_html

    return parse_telegram_html(html)[0]


def _assert_clean_edits(telegram: FakeTelegram, chat: int) -> list[dict[str, Any]]:
    """Every edit went through (none changed nothing), none was empty or over the limit."""
    calls = [c.params for c in telegram.calls("editMessageText")]
    assert all(c.get("_ok") for c in calls), "an edit was refused (a no-op or a bad one)"
    for edit in calls:
        assert edit["_visible"].strip()
        assert utf16_length(edit["_visible"]) <= 4096
    return [c for c in calls if str(c["chat_id"]) == str(chat)]


def test_a_streamed_reply_grows_by_edits_and_ends_formatted(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    env = _env(
        sqlite_url,
        tmp_path,
        fake_llm,
        telegram,
        streaming="on",
        stream_edit_interval="0.4",
    )
    gateway_factory(settings_from_env(env))
    chat = 4_200_001
    telegram.push_update(retarget(payload("private_text"), chat))

    shown = wait_until(lambda: _finished(telegram, chat), timeout=90, what="the final edit")

    assert shown == [telegram_visible(FINAL.html)], "one message, the final text"
    (draft,) = telegram.sent_messages(chat)
    assert "parse_mode" not in draft, "drafts are plain text until final"
    edits = _assert_clean_edits(telegram, chat)
    assert len(edits) >= 3, "the reply grew by edits"
    growing = [e["_visible"] for e in edits[:-1]]
    assert all(REPLY.startswith(text) for text in [draft["_visible"], *growing])
    finals = [e for e in edits if e.get("parse_mode") == "HTML"]
    assert len(finals) == 1, "the final formatted text exactly once"
    assert edits[-1] is finals[0]
    assert finals[0]["text"] == FINAL.html


def test_streaming_off_sends_one_message_as_today(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    env = _env(sqlite_url, tmp_path, fake_llm, telegram, streaming="off")
    gateway_factory(settings_from_env(env))
    chat = 4_200_002
    telegram.push_update(retarget(payload("private_text"), chat))

    (sent,) = wait_until(lambda: telegram.sent_messages(chat), timeout=90, what="the reply")

    assert sent["parse_mode"] == "HTML"
    assert sent["text"] == FINAL.html
    assert telegram.calls("editMessageText") == []
    assert fake_llm.chat_requests()[0].get("stream") is None


def test_a_worker_killed_mid_stream_ends_with_one_message(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    fake_llm.stream_tokens_per_second = 8
    env = _env(
        postgres_url,
        tmp_path,
        fake_llm,
        telegram,
        redis_url=redis_url,
        streaming="on",
        stream_edit_interval="0.3",
    )
    fake_llm.reply = lambda body: REPLY
    gateway_factory(settings_from_env(env))
    victim = start_worker(env, concurrency=1)
    processes.append(victim)
    chat = 4_200_003
    telegram.push_update(retarget(payload("private_text"), chat))
    wait_until(
        lambda: [c for c in telegram.calls("editMessageText") if c.params.get("_ok")],
        timeout=90,
        what="the first edit",
    )
    victim.kill()
    fake_llm.stream_tokens_per_second = 80  # the heir's call only has to finish
    heir = start_worker(env, concurrency=1)
    processes.append(heir)

    shown = wait_until(lambda: _finished(telegram, chat), timeout=120, what="the final edit")

    assert shown == [telegram_visible(FINAL.html)]
    assert len(telegram.sent_messages(chat)) == 1, "the draft was edited, not posted again"
    assert len(fake_llm.chat_requests()) == 2, "the turn ran again"
    _assert_clean_edits(telegram, chat)


def test_a_draft_post_with_a_lost_answer_is_marked_never_doubled(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    telegram.after_next("sendMessage", AfterPost.drop_connection())
    env = _env(sqlite_url, tmp_path, fake_llm, telegram, streaming="on")
    gateway = gateway_factory(settings_from_env(env))
    chat = 4_200_004
    telegram.push_update(retarget(payload("private_text"), chat))

    state = reply_outcome(gateway.runtime.factory)

    assert state == "unknown", "Telegram cannot say whether the draft exists: marked"
    assert len(telegram.messages(chat)) == 1, "the draft that may exist was not posted again"
    (draft,) = telegram.sent_messages(chat)
    assert "parse_mode" not in draft, "it was the plain-text draft"
    assert REPLY.startswith(draft["_visible"])
    assert telegram.calls("editMessageText") == []


def test_a_draft_deleted_mid_stream_is_replaced_by_one_new_message(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    resume = threading.Event()
    fake_llm.queue_replies(ScriptedReply(REPLY, pause_after=20, resume=resume))
    env = _env(sqlite_url, tmp_path, fake_llm, telegram, streaming="on", stream_edit_interval="0.4")
    gateway = gateway_factory(settings_from_env(env))
    chat = 4_200_005
    telegram.push_update(retarget(payload("private_text"), chat))
    (draft,) = wait_until(lambda: telegram.sent_messages(chat), timeout=90, what="the draft")
    telegram.delete(chat, draft["_message_id"])
    resume.set()

    state = reply_outcome(gateway.runtime.factory)

    assert state == "sent"
    assert telegram.messages(chat) == [telegram_visible(FINAL.html)], "one complete reply"
    gone, posted = telegram.sent_messages(chat)
    assert posted["text"] == FINAL.html, "the reply posted anew, formatted, once"
    refused = [
        c.params
        for c in telegram.calls("editMessageText")
        if str(c.params["message_id"]) == str(gone["_message_id"]) and not c.params.get("_ok")
    ]
    assert len(refused) == 2, "a draft edit found it gone and streaming stopped; then the final"
    assert recorded_drafts(gateway.runtime.factory) == [f"{chat}:{posted['_message_id']}"], (
        "the new one is recorded"
    )
