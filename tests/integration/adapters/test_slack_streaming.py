"""Streamed replies on Slack through the real pipeline: drafts grow by ``chat.update``.

Signed events go into the real gateway; the fake provider streams its answer at a set
pace; the fake Slack keeps every message's current text, records every post and update,
and enforces about one post or update per second per channel with 429s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import DRAFT_MARK
from adapters.slack.chunks import MAX_MESSAGE_CHARS, render_chunks
from adapters.slack.mrkdwn import escape
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.outbox import recorded_drafts, reply_outcome
from tests.fixtures.platform_servers.faults import AfterPost
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    SlackFailure,
    load_payload,
    sign,
)
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    settings_from_env,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.integration

WEBHOOK = "/webhooks/slack/default"
DM = "D0ALICE01"
REPLY = (
    "Here is the **plan** for the week, step by step:\n\n"
    + " ".join(f"word{n}" for n in range(120))
    + "\n\n```python\nprint('done')\n```"
)
LONG_REPLY = " ".join(f"paragraph{n // 40}word{n}" for n in range(480))
"""About 8,500 characters: three messages of at most 3,900."""


def _env(db_url: str, home: Path, llm: FakeLLM, slack: FakeSlack, **extra: Any) -> dict[str, str]:
    return hubbub_env(
        db_url=db_url,
        home=home,
        fake=llm,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_base=slack.api_base,
        **extra,
    )


def _ask(gateway: GatewayServer, payload: str = "message_im") -> None:
    body = json.dumps(load_payload(payload)).encode()
    headers = sign(body) | {"Content-Type": "application/json"}
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        assert client.post(WEBHOOK, content=body, headers=headers).status_code == 200


def _final(reply: str) -> list[str]:
    return [chunk.mrkdwn for chunk in render_chunks(reply)]


def _finished(slack: FakeSlack, final: list[str]) -> list[str] | None:
    shown = slack.shown(DM)
    return shown if shown[-len(final) :] == final else None


def _assert_clean_updates(slack: FakeSlack) -> list[dict[str, Any]]:
    """Every update went through and changed its message; none empty or over the limit."""
    calls = slack.calls_to("chat.update")
    assert all(c.answered == "ok" for c in calls), "an update was refused"
    before = {c.response["ts"]: c.params["text"] for c in slack.calls_to("chat.postMessage")}
    updates = [c.params for c in calls]
    for update in updates:
        assert update["text"].strip()
        assert len(update["text"]) <= MAX_MESSAGE_CHARS
        assert update["text"] != before[update["ts"]], "an update that changed nothing"
        before[update["ts"]] = update["text"]
    return updates


def _draft_text(text: str) -> str:
    assert text.endswith(DRAFT_MARK), "a draft says it is still being written"
    return text.removesuffix(DRAFT_MARK)


def test_a_streamed_reply_grows_by_updates_and_ends_in_mrkdwn(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on"))
    )
    final = _final(REPLY)
    _ask(gateway)

    shown = wait_until(lambda: _finished(fake_slack, final), timeout=90, what="the final update")

    assert shown == final, "one message, the final text"
    (draft,) = fake_slack.posted(DM)
    assert draft["mrkdwn"] in (False, "false", "0"), "drafts are plain text"
    updates = _assert_clean_updates(fake_slack)
    assert len(updates) >= 3, "the reply grew by updates"
    growing = [_draft_text(u["text"]) for u in updates[:-1]]
    assert all(escape(REPLY).startswith(text) for text in [_draft_text(draft["text"]), *growing])
    assert [u["text"] for u in updates].count(final[0]) == 1, "the final text exactly once"
    assert updates[-1]["text"] == final[0]
    assert fake_slack.flood.refused == 0, "the default interval stays inside Slack's limit"


def _shows(slack: FakeSlack, channel: str, final: list[str]) -> Callable[[], bool]:
    return lambda: slack.shown(channel) == final


def _ask_in(gateway: GatewayServer, channel: str, number: int) -> None:
    """The DM ``message_im`` event, as if sent in another DM ``channel``."""
    payload = load_payload("message_im")
    payload["event_id"] = f"Ev0IM{number:06d}"
    payload["event"] |= {"channel": channel, "client_msg_id": f"busy-{number}"}
    body = json.dumps(payload).encode()
    headers = sign(body) | {"Content-Type": "application/json"}
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        assert client.post(WEBHOOK, content=body, headers=headers).status_code == 200


def test_final_edits_do_not_wait_behind_drafts_that_spent_their_share_of_a_limit(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    """Several replies stream at once and their drafts spend their half of ``chat.update``'s
    budget: the later drafts are held back until the window frees (an hour here), the
    finals are not. Before, each turn's final delivery waited out its drafts' hold."""
    fake_llm.stream_tokens_per_second = 30
    fake_llm.reply = lambda body: REPLY
    env = _env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on", worker_concurrency="3")
    settings = settings_from_env(env)
    limits = {name: dict(rates) for name, rates in settings.platform_limits.items()}
    limits["slack"]["chat.update"] = "8/hour"
    gateway = gateway_factory(settings.model_copy(update={"platform_limits": limits}))
    final = _final(REPLY)
    channels = [f"D0BUSY{n:04d}" for n in range(3)]
    for number, channel in enumerate(channels):
        _ask_in(gateway, channel, number)

    for channel in channels:
        wait_until(_shows(fake_slack, channel, final), timeout=90, what=f"the final in {channel}")

    updates = [c.params["text"] for c in fake_slack.calls_to("chat.update")]
    assert len([t for t in updates if t.endswith(DRAFT_MARK)]) == 4, "drafts spent their half"
    assert updates.count(final[0]) == 3, "each final once, inside the same hour's budget"
    assert fake_slack.flood.refused == 0


def test_a_reply_past_the_limit_continues_in_the_next_message(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 60
    fake_llm.queue_replies(ScriptedReply(LONG_REPLY))
    env = _env(
        sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on", stream_edit_interval_slack="1.0"
    )
    gateway = gateway_factory(settings_from_env(env))
    final = _final(LONG_REPLY)
    assert len(final) == 3
    _ask(gateway)

    shown = wait_until(lambda: _finished(fake_slack, final), timeout=90, what="the final texts")

    assert shown == final, "the drafts became the reply's messages, nothing more"
    posts = fake_slack.calls_to("chat.postMessage")
    assert len(posts) == 3, "each message posted once"
    assert DRAFT_MARK in posts[1].params["text"], "the reply continued in a next draft"
    updates = _assert_clean_updates(fake_slack)
    for index, post in enumerate(posts):
        texts = [
            post.params["text"],
            *(u["text"] for u in updates if u["ts"] == post.response["ts"]),
        ]
        assert texts.count(final[index]) == 1, "each message's final text exactly once"


def test_streaming_off_posts_one_message_as_today(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="off"))
    )
    _ask(gateway)

    (posted,) = wait_until(lambda: fake_slack.posted(DM), timeout=90, what="the reply")

    assert posted["text"] == _final(REPLY)[0]
    assert fake_slack.calls_to("chat.update") == []
    assert fake_llm.chat_requests()[0].get("stream") is None


def test_a_worker_killed_mid_stream_ends_with_one_message(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    fake_llm.stream_tokens_per_second = 8
    fake_llm.reply = lambda body: REPLY
    env = _env(
        postgres_url,
        tmp_path,
        fake_llm,
        fake_slack,
        redis_url=redis_url,
        streaming="on",
        stream_edit_interval_slack="0.3",
    )
    gateway = gateway_factory(settings_from_env(env))
    victim = start_worker(env, concurrency=1)
    processes.append(victim)
    final = _final(REPLY)
    _ask(gateway)
    wait_until(
        lambda: [c for c in fake_slack.calls_to("chat.update") if c.answered == "ok"],
        timeout=90,
        what="the first update",
    )
    victim.kill()
    fake_llm.stream_tokens_per_second = 80  # the heir's call only has to finish
    heir = start_worker(env, concurrency=1)
    processes.append(heir)

    shown = wait_until(lambda: _finished(fake_slack, final), timeout=120, what="the final text")

    assert shown == final
    assert len(fake_slack.posted(DM)) == 1, "the draft was updated, not posted again"
    assert len(fake_llm.chat_requests()) == 2, "the turn ran again"
    assert all(c.answered == "ok" for c in fake_slack.calls_to("chat.update"))


def test_a_draft_post_whose_answer_was_lost_is_settled_from_the_history(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    fake_slack.after_next("chat.postMessage", AfterPost.drop_connection())
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on"))
    )
    final = _final(REPLY)
    _ask(gateway)

    shown = wait_until(lambda: _finished(fake_slack, final), timeout=90, what="the final text")

    assert shown == final, "the draft the lost answer created became the reply"
    assert len(fake_slack.posted(DM)) == 1, "never posted again"
    assert fake_slack.calls_to("conversations.history"), "settled from the history"
    assert reply_outcome(gateway.runtime.factory) == "sent"


def test_a_lost_draft_the_history_shows_only_later_is_edited_by_the_final_delivery(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    fake_slack.after_next("chat.postMessage", AfterPost.drop_connection())
    fake_slack.fail_next("conversations.history", SlackFailure.api_error("internal_error"))
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on"))
    )
    final = _final(REPLY)
    _ask(gateway)

    shown = wait_until(lambda: _finished(fake_slack, final), timeout=90, what="the final text")

    assert shown == final, "the draft found in the history became the reply"
    assert len(fake_slack.posted(DM)) == 1, "never posted again"
    (update,) = fake_slack.calls_to("chat.update")
    assert update.params["text"] == final[0], "streaming stopped; the final edit, once"
    assert len(fake_slack.calls_to("conversations.history")) == 2
    assert reply_outcome(gateway.runtime.factory) == "sent"


def test_a_mention_in_a_channel_streams_in_the_thread_under_it(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    fake_llm.queue_replies(ScriptedReply(REPLY))
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on"))
    )
    final = _final(REPLY)
    _ask(gateway, "app_mention")

    shown = wait_until(
        lambda: fake_slack.shown("C0GENERAL")[-1:] == final and fake_slack.shown("C0GENERAL"),
        timeout=90,
        what="the final text",
    )

    assert shown == final
    (draft,) = fake_slack.posted("C0GENERAL")
    assert draft["thread_ts"] == "1732799200.000300", "the draft starts the thread"
    assert fake_slack.channel_messages("C0GENERAL")[0]["thread_ts"] == "1732799200.000300"
    assert len(_assert_clean_updates(fake_slack)) >= 2


def test_a_draft_deleted_mid_stream_is_replaced_by_one_new_message(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    fake_llm.stream_tokens_per_second = 30
    resume = threading.Event()
    fake_llm.queue_replies(ScriptedReply(REPLY, pause_after=20, resume=resume))
    gateway = gateway_factory(
        settings_from_env(_env(sqlite_url, tmp_path, fake_llm, fake_slack, streaming="on"))
    )
    final = _final(REPLY)
    _ask(gateway)
    (draft,) = wait_until(
        lambda: fake_slack.calls_to("chat.postMessage"), timeout=90, what="the draft"
    )
    fake_slack.delete(DM, draft.response["ts"])
    resume.set()

    state = reply_outcome(gateway.runtime.factory)

    assert state == "sent"
    assert fake_slack.shown(DM) == final, "one complete reply"
    _, posted = fake_slack.calls_to("chat.postMessage")
    assert posted.params["text"] == final[0], "the reply posted anew, in mrkdwn, once"
    refused = [c for c in fake_slack.calls_to("chat.update") if c.answered == "message_not_found"]
    assert len(refused) == 2, "a draft update found it gone and streaming stopped; then the final"
    assert recorded_drafts(gateway.runtime.factory) == [f"{DM}:{posted.response['ts']}"], (
        "the new one is recorded"
    )
