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


class TestModes:
    def test_off_serves_neither_page_nor_api(self, start: Start) -> None:
        client = start(webchat="off")
        for path in ("/", "/api/webchat/status", "/api/webchat/c1/messages"):
            assert client.get(path).status_code == 404, path
        assert post_message(client, "c1", "hello").status_code == 404
        assert client.get("/healthz").status_code == 200

    def test_local_answers_loopback_clients_only(self, start: Start) -> None:
        client = start()  # the default: local
        assert client.get("/").status_code == 200
        assert post_message(client, "c1", "hi", user="ann").status_code == 202
        # Through a reverse proxy on this host the client is the forwarded address.
        proxied = {"x-forwarded-for": "203.0.113.9"}
        assert client.get("/", headers=proxied).status_code == 404
        assert client.get("/api/webchat/c1/messages", headers=proxied).status_code == 404
        sent = client.post("/api/webchat/c1/messages", json={"text": "x"}, headers=proxied)
        assert sent.status_code == 404
        # A page that rebinds its own name to 127.0.0.1 sends its own Host header.
        rebound = client.get("/api/webchat/c1/messages", headers={"host": "evil.example"})
        assert rebound.status_code == 404
        assert len(conversation(client, "c1")) >= 1

    def test_the_same_client_id_in_two_conversations_is_two_messages(self, start: Start) -> None:
        client = start()
        first = post_message(client, "c1", "one", user="ann", id="1")
        second = post_message(client, "c2", "two", user="bob", id="1")
        assert first.json()["duplicate"] is False
        assert second.json()["duplicate"] is False
        assert wait_replies(client, "c1", 1)[0]["text"].endswith("one")
        assert wait_replies(client, "c2", 1)[0]["text"].endswith("two")


class TestPublic:
    def browser(self, client: httpx.Client) -> httpx.Client:
        """Another browser: the same gateway, its own cookie jar."""
        other = httpx.Client(base_url=client.base_url, timeout=30)
        self._others.append(other)
        return other

    @pytest.fixture(autouse=True)
    def _close_browsers(self) -> Iterator[None]:
        self._others: list[httpx.Client] = []
        yield
        for other in self._others:
            other.close()

    def test_the_first_post_sets_a_signed_httponly_cookie(self, start: Start) -> None:
        client = start(webchat="public")
        response = post_message(client, "mine", "hello")
        assert response.status_code == 202
        cookie = response.headers["set-cookie"]
        assert cookie.startswith("hubbub_webchat=")
        for attribute in ("HttpOnly", "SameSite=lax", "Path=/api/webchat", "Max-Age="):
            assert attribute in cookie
        again = post_message(client, "mine", "and again")
        assert "set-cookie" not in again.headers
        assert conversation(client, "mine")[0]["text"] == "hello"

    def test_the_cookie_is_secure_behind_an_https_public_url(self, start: Start) -> None:
        client = start(webchat="public", public_url="https://chat.example.org")
        response = post_message(client, "mine", "hello")
        assert "Secure" in response.headers["set-cookie"]

    def test_another_browser_cannot_read_or_join_a_conversation(self, start: Start) -> None:
        ann = start(webchat="public")
        post_message(ann, "shared-id", "ann's secret", user="ann")
        wait_replies(ann, "shared-id", 1)
        bob = self.browser(ann)
        assert bob.get("/api/webchat/shared-id/messages").status_code == 404
        assert post_message(bob, "shared-id", "bob here", user="ann").status_code == 202
        bob_sees = [m["text"] for m in conversation(bob, "shared-id")]
        assert "ann's secret" not in " ".join(bob_sees)
        ann_sees = [m["text"] for m in conversation(ann, "shared-id")]
        assert "bob here" not in " ".join(ann_sees)

    def test_a_forged_cookie_opens_nothing(self, start: Start) -> None:
        ann = start(webchat="public")
        post_message(ann, "c1", "hello")
        value = ann.cookies["hubbub_webchat"]
        browser_id = value.split(".")[0]
        forger = self.browser(ann)
        for forged in (browser_id, f"{browser_id}.AAAA", f"{browser_id}.{value[-5:]}"):
            forger.cookies.set("hubbub_webchat", forged)
            assert forger.get("/api/webchat/c1/messages").status_code == 404
        forger.cookies.clear()
        forger.cookies.set("hubbub_webchat", value)
        assert forger.get("/api/webchat/c1/messages").status_code == 200

    def test_typing_an_allowed_name_does_not_pass_the_allowlist(self, start: Start) -> None:
        client = start(webchat="public", allow_users="ann")
        refused = post_message(client, "c1", "I am ann", user="ann")
        assert refused.status_code == 403

    def test_client_ids_are_deduplicated_per_conversation(self, start: Start) -> None:
        ann = start(webchat="public")
        bob = self.browser(ann)
        first = post_message(ann, "c1", "from ann", id="1")
        second = post_message(bob, "c1", "from bob", id="1")
        assert first.json()["duplicate"] is False
        assert second.json()["duplicate"] is False
        assert post_message(ann, "c1", "from ann", id="1").json()["duplicate"] is True
        assert wait_replies(bob, "c1", 1)[0]["text"].endswith("from bob")
