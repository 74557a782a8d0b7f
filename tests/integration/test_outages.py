"""What clients are told while a dependency is down: never a 500.

Redis down: a web chat message is stored before the doorbell rings, so it is accepted (202)
and answered once the broker is back (a worker's sweeper rings again). Postgres down:
nothing can be stored, so the answer is 503 with ``Retry-After`` and the client retries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent_core.db.migrations import upgrade_to_head
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.restartable import PrivatePostgres, PrivateRedis
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    post_message,
    settings_from_env,
    start_worker,
    wait_replies,
)

pytestmark = pytest.mark.integration


def test_a_message_posted_while_redis_is_down_is_accepted_and_answered_later(
    postgres_url: str,
    private_redis: PrivateRedis,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=private_redis.url)
    gateway = gateway_factory(settings_from_env(env))
    private_redis.stop()
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        first = post_message(client, "outage", "still there?", id="m-1")
        assert first.status_code == 202, first.text
        again = post_message(client, "outage", "still there?", id="m-1")
        assert again.status_code == 202, again.text
        assert again.json() == first.json() | {"duplicate": True}

        private_redis.start()
        processes.append(start_worker(env))
        (reply,) = wait_replies(client, "outage", 1, timeout=120)
    assert "still there?" in reply["text"]


def test_while_postgres_is_down_the_api_answers_503_with_retry_after(
    private_postgres: PrivatePostgres,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    upgrade_to_head(private_postgres.url)
    env = hubbub_env(db_url=private_postgres.url, home=tmp_path, fake=fake_llm)
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        assert post_message(client, "pg", "before").status_code == 202
        private_postgres.stop("immediate")
        posted = post_message(client, "pg", "during", id="during-1")
        listed = client.get("/api/webchat/pg/messages")
        for response in (posted, listed):
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) > 0
            assert "database" in response.json()["error"]

        private_postgres.start()
        retried = post_message(client, "pg", "during", id="during-1")
        assert retried.status_code == 202, retried.text
        assert retried.json()["duplicate"] is False
