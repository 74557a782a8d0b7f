"""Busy modes and /stop through real ``hubbub worker`` processes on Postgres and Redis.

The fake provider holds an answer until the test releases it, so "while a turn runs" is a
state the test waits for, not a race it hopes to win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from adapters.messages import InboundMessage
from agent_core.busy import ANSWERED_BY, INTERRUPTED_BY
from agent_core.commands import STOPPED_REPLY
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, OutboxEntry, TurnState
from tests.fixtures import services
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.integration

wait_replies = partial(services.wait_replies, timeout=60)


@pytest.fixture
def start(
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]]]:
    """Start a gateway for ``env``; returns it with a web chat client (closed afterwards)."""
    clients: list[httpx.Client] = []

    def begin(env: dict[str, str]) -> tuple[GatewayServer, httpx.Client]:
        gateway = gateway_factory(settings_from_env(env))
        clients.append(httpx.Client(base_url=gateway.base_url, timeout=30))
        return gateway, clients[-1]

    yield begin
    for client in clients:
        client.close()


def _messages(gateway: GatewayServer, chat_id: str) -> list[Message]:
    with transaction(gateway.runtime.factory) as db:
        return list(
            db.scalars(
                select(Message)
                .join(ChatSession, ChatSession.id == Message.session_id)
                .where(ChatSession.chat_id == chat_id)
                .order_by(Message.seq)
            )
        )


def _settled(gateway: GatewayServer, chat_id: str) -> list[Message]:
    """The conversation once no message waits for a turn (no reply can still come)."""
    found: list[Message] = wait_until(
        lambda: (
            (m := _messages(gateway, chat_id))
            and all(x.turn_state != TurnState.PENDING for x in m)
            and m
        ),
        timeout=60,
        what=f"every message of {chat_id} answered",
    )
    return found


def _count_replies(messages: list[Message]) -> int:
    return sum(m.role == "assistant" for m in messages)


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


def test_collect_three_quick_messages_get_one_reply(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    start: Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]],
    processes: list[ServiceProcess],
) -> None:
    # A window far longer than three local POSTs take, even on a loaded machine.
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        redis_url=redis_url,
        busy_mode="collect",
        collect_window_seconds=8,
    )
    gateway, client = start(env)
    processes.append(start_worker(env))
    for text in ("hey", "the deploy failed", "on staging"):
        post_accepted(client, "c1", text)
    (reply,) = wait_replies(client, "c1", 1)
    assert reply["text"] == "echo: on staging"
    stored = _settled(gateway, "c1")
    assert len(replies(client, "c1")) == 1
    (request,) = fake_llm.chat_requests()
    assert _user_texts(request) == ["hey", "the deploy failed", "on staging"]
    latest = next(m for m in stored if m.content == "on staging")
    assert [m.meta.get(ANSWERED_BY) for m in stored if m.role == "user"] == [
        latest.id,
        latest.id,
        None,
    ]


def test_interrupt_cancels_the_slow_turn_and_answers_the_newest_once(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    start: Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]],
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        redis_url=redis_url,
        busy_mode="interrupt",
    )
    gateway, client = start(env)
    processes.append(start_worker(env))
    fake_llm.hold_next()
    post_accepted(client, "c1", "summarise the logs")
    wait_until(lambda: fake_llm.held == 1, timeout=60, what="the slow model call")
    post_accepted(client, "c1", "actually, only the errors")
    post_accepted(client, "c1", "from today")
    fake_llm.release()
    (reply,) = wait_replies(client, "c1", 1)
    assert reply["text"] == "echo: from today"
    stored = _settled(gateway, "c1")
    assert len(replies(client, "c1")) == 1
    slow, answering = fake_llm.chat_requests()
    assert _user_texts(slow) == ["summarise the logs"]
    assert _user_texts(answering) == [
        "summarise the logs",
        "actually, only the errors",
        "from today",
    ]
    first, second, newest = (m for m in stored if m.role == "user")
    assert first.meta[INTERRUPTED_BY] == newest.id
    assert second.meta[ANSWERED_BY] == newest.id


def test_stop_cancels_a_slow_turn_and_says_so(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    start: Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]],
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    gateway, client = start(env)
    processes.append(start_worker(env))
    fake_llm.hold_next()
    post_accepted(client, "c1", "write me an essay")
    wait_until(lambda: fake_llm.held == 1, timeout=60, what="the slow model call")
    post_accepted(client, "c1", "/stop")
    fake_llm.release()
    (reply,) = wait_replies(client, "c1", 1)
    assert reply["text"] == STOPPED_REPLY
    _settled(gateway, "c1")
    post_accepted(client, "c1", "/stop")
    stopped, nothing = wait_replies(client, "c1", 2)
    assert stopped["text"] == STOPPED_REPLY
    assert nothing["text"] == "Nothing is running, so there is nothing to stop."
    assert len(fake_llm.chat_requests()) == 1


def test_stop_ends_a_streaming_reply_before_the_model_finishes(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    start: Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]],
    processes: list[ServiceProcess],
) -> None:
    """The provider's stream is closed soon after the ``/stop``: it stops generating."""
    env = hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url, streaming="on"
    )
    gateway, client = start(env)
    processes.append(start_worker(env))
    fake_llm.stream_tokens_per_second = 5  # 300 words: a minute of streaming
    fake_llm.queue_replies(ScriptedReply(" ".join(f"word{n}" for n in range(300))))
    post_accepted(client, "c1", "write me an essay", stream=True)
    wait_until(lambda: fake_llm.chat_requests(), timeout=60, what="the streamed model call")
    post_accepted(client, "c1", "/stop")
    (reply,) = wait_replies(client, "c1", 1)
    assert reply["text"] == STOPPED_REPLY
    wait_until(lambda: fake_llm.streams_cut == 1, timeout=60, what="the stream closed early")
    (essay,) = (m for m in _settled(gateway, "c1") if m.content == "write me an essay")
    assert essay.meta[INTERRUPTED_BY] is not None
    assert len(fake_llm.chat_requests()) == 1


def test_two_workers_on_one_busy_group_give_one_reply_per_turn_in_order(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    start: Callable[[dict[str, str]], tuple[GatewayServer, httpx.Client]],
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        redis_url=redis_url,
        busy_mode="collect",
        collect_window_seconds=0.2,
        trigger_mode="all",
    )
    gateway, _client = start(env)
    processes.extend([start_worker(env, concurrency=2), start_worker(env, concurrency=2)])

    def say(i: int, name: str) -> None:
        gateway.runtime.intake.accept(
            InboundMessage(
                platform="webchat",
                chat_id="ops",
                chat_type="group",
                message_id=f"ops-{i}",
                sender_id=name,
                sender_name=name,
                text=f"g{i}",
            )
        )

    fake_llm.hold_next()
    say(0, "ann")
    wait_until(lambda: fake_llm.held == 1, timeout=60, what="the first turn's model call")
    for i, name in ((1, "bob"), (2, "cy"), (3, "ann")):
        say(i, name)
    fake_llm.release()
    _settled(gateway, "ops")
    say(4, "bob")
    stored = wait_until(
        lambda: (m := _settled(gateway, "ops")) and _count_replies(m) == 3 and m,
        timeout=60,
        what="the third reply",
    )
    answered = [m for m in stored if m.role == "assistant"]
    # One reply per turn: to g0, to g3 (with g1 and g2), to g4; in that order.
    triggers = [
        next(m for m in stored if m.role == "user" and m.anchor_seq == r.anchor_seq).content
        for r in answered
    ]
    assert triggers == ["g0", "g3", "g4"]
    g3 = next(m for m in stored if m.content == "g3")
    assert [m.meta.get(ANSWERED_BY) for m in stored if m.content in ("g1", "g2")] == [
        g3.id,
        g3.id,
    ]
    with transaction(gateway.runtime.factory) as db:
        outbox = list(db.scalars(select(OutboxEntry.trigger_message_id)))
    assert sorted(outbox) == sorted({m.id for m in stored if m.content in ("g0", "g3", "g4")})
    assert len(fake_llm.chat_requests()) == 3
