"""Who may use the web chat: allowlists, the listener modes, conversation ownership."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    conversation,
    hubbub_env,
    post_message,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

Start = Callable[..., httpx.Client]


@pytest.fixture
def start(
    sqlite_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[Start]:
    """A gateway with the given settings, and a client for it (closed after the test)."""
    clients: list[httpx.Client] = []

    def start(**settings: Any) -> httpx.Client:
        env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, **settings)
        gateway = gateway_factory(settings_from_env(env))
        client = httpx.Client(base_url=gateway.base_url, timeout=30)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


class TestAllowlists:
    def test_a_sender_outside_the_list_is_refused_with_403_and_nothing_stored(
        self, start: Start
    ) -> None:
        client = start(allow_users="ann")
        refused = post_message(client, "c1", "let me in", user="bob")
        assert refused.status_code == 403
        assert "allowlist" in refused.json()["error"]
        assert client.get("/api/webchat/c1/messages").status_code == 404
        assert post_message(client, "c1", "hello", user="ann").status_code == 202
        wait_replies(client, "c1", 1)

    def test_a_conversation_outside_the_list_is_refused_with_403(self, start: Start) -> None:
        client = start(allow_chats="open")
        refused = post_message(client, "closed", "hi", user="ann")
        assert refused.status_code == 403
        assert client.get("/api/webchat/closed/messages").status_code == 404
        assert post_message(client, "open", "hi", user="ann").status_code == 202
        assert conversation(client, "open")
