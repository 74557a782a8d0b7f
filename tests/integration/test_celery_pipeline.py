"""The production shape: gateway + Celery worker processes on Postgres and Redis.

Workers are real ``hubbub worker`` processes; they reach the fake provider over HTTP.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.fixtures import services
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    conversation,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def env(postgres_url: str, redis_url: str, fake_llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)


@pytest.fixture
def client(
    env: dict[str, str], gateway_factory: Callable[..., GatewayServer]
) -> Iterator[httpx.Client]:
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
        yield c


# Replies come from worker processes: give them longer than the in-process default.
wait_replies = partial(services.wait_replies, timeout=40)


def test_message_in_reply_out_through_a_worker(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    processes.append(start_worker(env))
    post_accepted(client, "c1", "hello worker")
    (reply,) = wait_replies(client, "c1", 1)
    assert reply["text"] == "echo: hello worker"
    assert client.get("/readyz").json()["broker"] == "redis"


def test_restarted_worker_sends_identical_system_prompt_bytes(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    first_worker = start_worker(env)
    processes.append(first_worker)
    post_accepted(client, "c1", "before restart")
    wait_replies(client, "c1", 1)
    first_worker.signal(signal.SIGTERM)
    assert first_worker.wait(60) == 0
    processes.append(start_worker(env))
    post_accepted(client, "c1", "after restart")
    wait_replies(client, "c1", 2)
    before, after = fake_llm.chat_requests()
    assert before["messages"][0]["role"] == "system"
    assert before["messages"][0]["content"] == after["messages"][0]["content"]


def test_worker_killed_mid_turn_gives_exactly_one_reply(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    victim = start_worker(env)
    processes.append(victim)
    fake_llm.sleep_next(30)
    post_accepted(client, "c1", "survive this")
    wait_until(lambda: len(fake_llm.chat_requests()) == 1, timeout=30, what="the slow call")
    victim.kill()
    processes.append(start_worker(env))
    (reply,) = wait_replies(client, "c1", 1, timeout=60)
    assert reply["text"] == "echo: survive this"
    time.sleep(1.5)  # several sweeps later there is still only one reply
    assert len(replies(client, "c1")) == 1
    assert [m["text"] for m in conversation(client, "c1")].count("survive this") == 1


def test_same_platform_message_twice_one_reply(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    processes.append(start_worker(env))
    post_accepted(client, "c1", "only once", id="tg-100")
    post_accepted(client, "c1", "only once", id="tg-100")
    wait_replies(client, "c1", 1)
    time.sleep(1)
    assert len(replies(client, "c1")) == 1
    assert len(fake_llm.chat_requests()) == 1


def test_sigterm_finishes_the_running_turn(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    worker = start_worker(env)
    processes.append(worker)
    fake_llm.sleep_next(2)
    post_accepted(client, "c1", "finish me")
    wait_until(lambda: len(fake_llm.chat_requests()) == 1, timeout=120, what="the call")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    (reply,) = replies(client, "c1")
    assert reply["text"] == "echo: finish me"


def test_messages_queued_while_no_worker_runs_are_answered_in_order(
    client: httpx.Client,
    env: dict[str, str],
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    for i in range(5):
        post_accepted(client, "queued", f"q{i}")
    for i in range(3):
        post_accepted(client, f"other{i}", "hi")
    processes.append(start_worker(env, concurrency=4))
    wait_replies(client, "queued", 5)
    asked = [
        r["messages"][-1]["content"]
        for r in fake_llm.chat_requests()
        if r["messages"][-1]["content"].startswith("q")
    ]
    assert asked == [f"q{i}" for i in range(5)]


def test_busy_group_is_compacted_by_a_worker_off_the_reply_path(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    from sqlalchemy import select

    from adapters.messages import InboundMessage
    from agent_core.db.engine import transaction
    from agent_core.db.models import Compaction

    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        redis_url=redis_url,
        context_length=8192,
        max_output_tokens=1024,
    )
    gateway = gateway_factory(settings_from_env(env))
    processes.append(start_worker(env))
    line = "Bob restarted nginx on web-{i}; the 502s stopped after the reload. " * 6
    for i in range(60):
        gateway.runtime.intake.accept(
            InboundMessage(
                platform="webchat",
                chat_id="ops",
                chat_type="group",
                message_id=f"ops-{i}",
                sender_name="bob",
                text=line.format(i=i),
            )
        )

    def compacted() -> list[Compaction]:
        with transaction(gateway.runtime.factory) as db:
            return list(db.scalars(select(Compaction)))

    (compaction,) = wait_until(compacted, timeout=60, what="a background compaction")
    assert compaction.trigger == "background"
    assert compaction.archived_count > 0
