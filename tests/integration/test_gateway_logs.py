"""What the gateway logs: one line per turn, not one per poll, never a message body."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    return gateway_factory(
        settings_from_env(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    )


def test_a_turn_is_one_info_line_without_the_body(
    gateway: GatewayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "logged", "the secret plan is zebra")
        wait_replies(client, "logged", 1)
    turns = wait_until(
        lambda: [r for r in caplog.records if r.getMessage() == "turn"], what="the turn line"
    )
    (turn,) = turns
    assert turn.levelno == logging.INFO
    assert turn.outcome == "reply"
    assert turn.session_id
    assert turn.latency_ms >= 0
    assert turn.model_calls == 1
    assert turn.prompt_tokens > 0
    assert turn.completion_tokens > 0
    everything = " ".join(f"{r.getMessage()} {vars(r)}" for r in caplog.records)
    assert "zebra" not in everything


def test_polling_is_not_logged_but_failures_and_posts_are(
    gateway: GatewayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "polled", "hi")
        for _ in range(5):
            assert client.get("/api/webchat/polled/messages").status_code == 200
        assert client.get("/api/webchat/nobody/messages").status_code == 404
    access = wait_until(
        lambda: (
            [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
            if any("nobody" in r.getMessage() for r in caplog.records)
            else None
        ),
        what="the access lines",
    )
    assert not [line for line in access if "GET /api/webchat/polled/messages" in line]
    assert [line for line in access if "POST /api/webchat/polled/messages" in line]
    assert [line for line in access if "GET /api/webchat/nobody/messages" in line]
