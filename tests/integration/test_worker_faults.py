"""Workers outlive their dependencies: Redis and Postgres restarts, lost workers.

Every worker here is a real ``hubbub worker`` process on a private Redis or Postgres that
the test restarts; replies come from the fake provider over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.restartable import PrivateRedis
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    conversation,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    start_worker,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_env(
    postgres_url: str, private_redis: PrivateRedis, fake_llm: FakeLLM, tmp_path: Path
) -> dict[str, str]:
    return hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=private_redis.url
    )


@pytest.fixture
def redis_client(
    redis_env: dict[str, str], gateway_factory: Callable[..., GatewayServer]
) -> Iterator[httpx.Client]:
    gateway = gateway_factory(settings_from_env(redis_env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
        yield c


def _answered_once(client: httpx.Client, conversation_id: str, text: str) -> None:
    (reply,) = replies(client, conversation_id)
    assert reply["text"] == f"echo: {text}"
    assert [m["text"] for m in conversation(client, conversation_id)].count(text) == 1


def test_worker_with_turns_in_flight_survives_a_redis_restart(
    redis_client: httpx.Client,
    redis_env: dict[str, str],
    private_redis: PrivateRedis,
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    worker = start_worker(redis_env)
    processes.append(worker)
    fake_llm.sleep_next(3, times=2)
    post_accepted(redis_client, "a", "in flight a")
    post_accepted(redis_client, "b", "in flight b")
    wait_until(lambda: len(fake_llm.chat_requests()) == 2, timeout=60, what="two slow calls")
    private_redis.restart()
    for name in ("a", "b"):
        wait_replies(redis_client, name, 1, timeout=120)
    post_accepted(redis_client, "c", "after the restart")
    wait_replies(redis_client, "c", 1, timeout=120)
    assert worker.proc.poll() is None, "".join(worker.lines[-40:])
    _answered_once(redis_client, "a", "in flight a")
    _answered_once(redis_client, "b", "in flight b")
    _answered_once(redis_client, "c", "after the restart")
