"""Slack end to end: signed events into the real gateway, litellm to the fake provider,
replies out through slack_sdk to the fake Slack — exactly once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.models import ChatSession, Message
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    SlackFailure,
    load_payload,
    sign,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration


WEBHOOK = "/webhooks/slack/default"


def slack_env(
    db_url: str, home: Path, llm: FakeLLM, slack: FakeSlack, **extra: Any
) -> dict[str, str]:
    settings: dict[str, Any] = {
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_base": slack.api_base,
    }
    return hubbub_env(db_url=db_url, home=home, fake=llm, **(settings | extra))


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    return gateway_factory(settings_from_env(slack_env(sqlite_url, tmp_path, fake_llm, fake_slack)))


def post_event(
    client: httpx.Client,
    payload: dict[str, Any],
    *,
    retry: int | None = None,
    secret: str = SIGNING_SECRET,
) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = sign(body, secret=secret) | {"Content-Type": "application/json"}
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return client.post(WEBHOOK, content=body, headers=headers)


def post_command(client: httpx.Client, fields: dict[str, str]) -> httpx.Response:
    body = urlencode(fields).encode()
    headers = sign(body) | {"Content-Type": "application/x-www-form-urlencoded"}
    return client.post(WEBHOOK, content=body, headers=headers)


def message_event(
    text: str, ts: str, *, user: str = "U0ALICE", event_id: str | None = None, **event: Any
) -> dict[str, Any]:
    payload = load_payload("message_channel")
    payload["event_id"] = event_id or f"Ev{ts.replace('.', '')}"
    payload["event"] |= {"text": text, "ts": ts, "event_ts": ts, "user": user, **event}
    return payload


def transcript(gateway: GatewayServer) -> list[dict[str, Any]]:
    with gateway.runtime.factory() as db:
        rows = db.execute(
            select(Message, ChatSession)
            .join(ChatSession, Message.session_id == ChatSession.id)
            .order_by(Message.id)
        ).all()
        return [
            {
                "role": m.role,
                "content": m.content,
                "speaker": m.speaker_name,
                "platform_id": m.platform_message_id,
                "deleted": m.deleted,
                "edited": m.edited_at is not None,
                "chat": s.chat_id,
                "thread": s.thread_id,
                "session": s.id,
                "turn": m.turn_state,
            }
            for m, s in rows
        ]


def wait_posted(fake: FakeSlack, n: int, timeout: float = 20) -> list[dict[str, Any]]:
    posted: list[dict[str, Any]] = wait_until(
        lambda: len(p := fake.posted()) >= n and p, timeout=timeout, what=f"{n} Slack posts"
    )
    return posted


class TestTurn:
    def test_mention_in_a_channel_is_answered_once_in_a_thread(
        self, client: httpx.Client, fake_slack: FakeSlack, fake_llm: FakeLLM, gateway: GatewayServer
    ) -> None:
        response = post_event(client, load_payload("app_mention"))
        assert response.status_code == 200
        # Acknowledged only once stored, with its turn queued (the reply comes later).
        (stored,) = transcript(gateway)
        assert stored["platform_id"] == "C0GENERAL:1732799200.000300"
        # Slack sends the same mention as a message event too, and retries the first.
        assert post_event(client, load_payload("message_mention")).status_code == 200
        assert post_event(client, load_payload("app_mention"), retry=1).status_code == 200
        (posted,) = wait_posted(fake_slack, 1)
        assert posted["channel"] == "C0GENERAL"
        assert posted["thread_ts"] == "1732799200.000300"
        assert posted["text"] == "echo: [Alice] what did we decide about the deploy?"
        # A later message is answered too; the first still has exactly one reply.
        post_event(client, message_event("<@U0HUBBUB> and hotfixes?", "1732799210.000310"))
        wait_posted(fake_slack, 2)
        assert len(fake_llm.chat_requests()) == 2
        assert [p["thread_ts"] for p in fake_slack.posted()] == [
            "1732799200.000300",
            "1732799210.000310",
        ]

    def test_group_chatter_is_context_without_a_model_call(
        self, client: httpx.Client, fake_slack: FakeSlack, fake_llm: FakeLLM, gateway: GatewayServer
    ) -> None:
        post_event(client, load_payload("message_channel"))
        post_event(client, load_payload("message_non_latin"))
        lines = transcript(gateway)
        assert [(line["speaker"], line["chat"]) for line in lines][:1] == [
            ("Carol Chen", "C0GENERAL")
        ]
        wait_posted(fake_slack, 1)  # the non-Latin message mentions the bot
        (request,) = fake_llm.chat_requests()
        contents = [m["content"] for m in request["messages"] if m["role"] == "user"]
        assert contents == [
            "[Carol Chen] The staging deploy is green again, we can ship after lunch.",
            "[Борис] Привет! Деплой перенесли на завтра? 明日の<リリース>は大丈夫ですか 🚀",
        ]
        assert fake_slack.posted()[0]["text"].startswith("echo: [Борис] Привет!")

    def test_unaddressed_message_alone_calls_no_model(
        self, client: httpx.Client, fake_slack: FakeSlack, fake_llm: FakeLLM, gateway: GatewayServer
    ) -> None:
        assert post_event(client, load_payload("message_channel")).status_code == 200
        (line,) = transcript(gateway)
        assert line["turn"] == "none", "recorded as context, no turn asked for"
        # A DM in another session is answered; the channel message still got no model call.
        post_event(client, load_payload("message_im"))
        wait_posted(fake_slack, 1)
        (request,) = fake_llm.chat_requests()
        assert request["messages"][-1]["content"].startswith("Hi! Can you summarise")

    def test_thread_is_its_own_session(
        self, client: httpx.Client, fake_slack: FakeSlack, gateway: GatewayServer
    ) -> None:
        post_event(client, load_payload("app_mention"))
        wait_posted(fake_slack, 1)
        # Slack echoes the bot's own reply; it joins the thread and is not stored.
        own = load_payload("own_message")
        own["event"]["ts"] = fake_slack.posted_ids()[0].split(":")[1]
        assert post_event(client, own).status_code == 200
        follow_up = message_event(
            "and for hotfixes?", "1732799260.000360", thread_ts="1732799200.000300"
        )
        post_event(client, follow_up)
        posted = wait_posted(fake_slack, 2)
        assert posted[1]["thread_ts"] == "1732799200.000300"
        sessions = {(line["chat"], line["thread"]) for line in transcript(gateway)}
        assert sessions == {("C0GENERAL", ""), ("C0GENERAL", "1732799200.000300")}
        contents = [line["content"] for line in transcript(gateway)]
        assert "We decided to deploy on Thursdays." not in contents

    def test_dm(self, client: httpx.Client, fake_slack: FakeSlack, gateway: GatewayServer) -> None:
        post_event(client, load_payload("message_im"))
        (posted,) = wait_posted(fake_slack, 1)
        assert posted["channel"] == "D0ALICE01"
        assert "thread_ts" not in posted
        assert posted["text"] == "echo: Hi! Can you summarise what changed in the deploy process?"

    def test_slash_command(
        self, client: httpx.Client, fake_slack: FakeSlack, fake_llm: FakeLLM, gateway: GatewayServer
    ) -> None:
        fields = load_payload("slash_command") | {"command": "/new", "text": ""}
        response = post_command(client, fields)
        assert response.status_code == 200
        assert response.json() == {"response_type": "in_channel"}
        (posted,) = wait_posted(fake_slack, 1)
        assert posted["channel"] == "C0GENERAL"
        assert "thread_ts" not in posted
        assert "fresh session" in posted["text"]
        assert fake_llm.chat_requests() == []

    def test_rate_limited_reply_is_delivered_once(
        self, client: httpx.Client, fake_slack: FakeSlack, gateway: GatewayServer
    ) -> None:
        fake_slack.fail_next("chat.postMessage", SlackFailure.rate_limited(1))
        post_event(client, load_payload("message_im"))
        (posted,) = wait_posted(fake_slack, 1)
        assert posted["channel"] == "D0ALICE01"
        assert [c.answered for c in fake_slack.calls_to("chat.postMessage")] == [
            "ratelimited",
            "ok",
        ]


def test_dm_turn_on_both_databases(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = gateway_factory(settings_from_env(slack_env(db_url, tmp_path, fake_llm, fake_slack)))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        assert post_event(client, load_payload("message_im")).status_code == 200
        assert post_event(client, load_payload("message_im"), retry=2).status_code == 200
        (posted,) = wait_posted(fake_slack, 1)
    assert posted["channel"] == "D0ALICE01"
    assert [line["role"] for line in transcript(gateway)] == ["user", "assistant"]


class TestVerification:
    @pytest.mark.parametrize("case", ["wrong secret", "stale", "missing", "tampered"])
    def test_unverified_event_gets_401_and_nothing_is_stored(
        self, client: httpx.Client, fake_llm: FakeLLM, gateway: GatewayServer, case: str
    ) -> None:
        body = json.dumps(load_payload("app_mention")).encode()
        headers = sign(body) | {"Content-Type": "application/json"}
        if case == "wrong secret":
            headers = sign(body, secret="wrong") | {"Content-Type": "application/json"}
        elif case == "stale":
            headers = sign(body, timestamp=int(time.time()) - 301) | {
                "Content-Type": "application/json"
            }
        elif case == "missing":
            headers = {"Content-Type": "application/json"}
        else:
            body += b" "
        response = client.post(WEBHOOK, content=body, headers=headers)
        assert response.status_code == 401
        assert "error" in response.json()
        assert transcript(gateway) == []
        assert fake_llm.chat_requests() == []

    def test_url_verification(self, client: httpx.Client, gateway: GatewayServer) -> None:
        payload = load_payload("url_verification")
        response = post_event(client, payload)
        assert response.status_code == 200
        assert response.json() == {"challenge": payload["challenge"]}

    def test_unknown_bot_is_404(self, client: httpx.Client) -> None:
        body = json.dumps(load_payload("app_mention")).encode()
        response = client.post("/webhooks/slack/nobody", content=body, headers=sign(body))
        assert response.status_code == 404


class TestTranscriptUpdates:
    def test_edits_and_deletes_update_the_transcript(
        self, client: httpx.Client, gateway: GatewayServer
    ) -> None:
        post_event(client, load_payload("message_channel"))
        post_event(client, load_payload("message_changed"))
        (line,) = transcript(gateway)
        assert line["content"] == "The staging deploy is green again, we can ship after 3pm."
        assert line["edited"]
        post_event(client, load_payload("message_deleted"))
        (line,) = transcript(gateway)
        assert line["deleted"]

    def test_own_and_other_bots_messages(
        self, client: httpx.Client, gateway: GatewayServer
    ) -> None:
        post_event(client, load_payload("own_message"))
        assert transcript(gateway) == []
        post_event(client, load_payload("bot_message"))
        (line,) = transcript(gateway)
        assert line["speaker"] == "Deploy Bot"
        assert line["turn"] == "none", "other bots are not answered unless configured"


class TestSocketMode:
    def test_event_over_the_socket_is_answered_in_its_thread(
        self,
        sqlite_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        fake_slack: FakeSlack,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = slack_env(sqlite_url, tmp_path, fake_llm, fake_slack, slack_app_token=APP_TOKEN)
        gateway = gateway_factory(settings_from_env(env))
        wait_until(lambda: fake_slack.socket_count == 1, what="socket mode connection")
        envelope = fake_slack.send_envelope(load_payload("app_mention"))
        assert fake_slack.wait_ack(envelope) == {"envelope_id": envelope}
        (posted,) = wait_posted(fake_slack, 1)
        assert posted["thread_ts"] == "1732799200.000300"
        assert posted["text"] == "echo: [Alice] what did we decide about the deploy?"
        with httpx.Client(base_url=gateway.base_url) as client:
            body = json.dumps(load_payload("app_mention")).encode()
            assert client.post(WEBHOOK, content=body, headers=sign(body)).status_code == 404
