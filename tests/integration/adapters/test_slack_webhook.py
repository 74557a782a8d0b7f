"""The Events API handler: real Bolt parsing and slack_sdk calls against the fake Slack."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.base import RETRY_LATER_SECONDS, BotConfig, WebhookVerificationError
from adapters.messages import InboundMessage
from adapters.slack import (
    SlackSocketModeListener,
    SlackWebhookHandler,
    create_listener,
    create_webhook,
)
from tests.fixtures.platform_servers.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    SlackFailure,
    load_payload,
    sign,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


class Sink:
    """Collects what the handler stores; can fail the next calls like a database outage."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.failures = 0
        self.gate: asyncio.Event | None = None

    async def __call__(self, inbound: InboundMessage) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("database unavailable")
        self.messages.append(inbound)


def bot_config(fake: FakeSlack, **overrides: Any) -> BotConfig:
    values: dict[str, Any] = {
        "platform": "slack",
        "token": BOT_TOKEN,
        "api_base": fake.api_base,
        "extra": {"signing_secret": SIGNING_SECRET},
    }
    return BotConfig(**(values | overrides))


def signed_json(
    payload: dict[str, Any], *, secret: str = SIGNING_SECRET, age: int = 0, retry: int | None = None
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    headers = {
        k.lower(): v for k, v in sign(body, secret=secret, timestamp=int(time.time()) - age).items()
    }
    headers["content-type"] = "application/json"
    if retry is not None:
        headers |= {"x-slack-retry-num": str(retry), "x-slack-retry-reason": "http_timeout"}
    return headers, body


def signed_form(fields: dict[str, str]) -> tuple[dict[str, str], bytes]:
    body = urlencode(fields).encode()
    headers = {k.lower(): v for k, v in sign(body).items()}
    headers["content-type"] = "application/x-www-form-urlencoded"
    return headers, body


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def handler(fake_slack: FakeSlack, sink: Sink) -> SlackWebhookHandler:
    return SlackWebhookHandler(bot_config(fake_slack), sink)


class TestSignature:
    @pytest.mark.parametrize(
        ("case", "fragment"),
        [
            ("wrong secret", "mismatch"),
            ("stale", "5-minute window"),
            ("future", "5-minute window"),
            ("missing", "missing"),
            ("tampered", "mismatch"),
            ("malformed timestamp", "malformed"),
        ],
    )
    async def test_unverified_requests_get_401_and_nothing_is_stored(
        self,
        handler: SlackWebhookHandler,
        sink: Sink,
        fake_slack: FakeSlack,
        case: str,
        fragment: str,
    ) -> None:
        payload = load_payload("app_mention")
        headers, body = signed_json(payload)
        if case == "wrong secret":
            headers, body = signed_json(payload, secret="not-the-secret")
        elif case == "stale":
            headers, body = signed_json(payload, age=301)
        elif case == "future":
            headers, body = signed_json(payload, age=-301)
        elif case == "missing":
            headers = {"content-type": "application/json"}
        elif case == "tampered":
            body = body.replace(b"deploy", b"delete")
        else:
            headers["x-slack-request-timestamp"] = "yesterday"
        with pytest.raises(WebhookVerificationError, match=fragment) as caught:
            await handler.handle(headers, body)
        assert caught.value.status_code == 401
        assert sink.messages == []
        assert fake_slack.calls == []

    async def test_within_the_window_is_accepted(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        response = await handler.handle(*signed_json(load_payload("app_mention"), age=290))
        assert response.status == 200
        assert [m.text for m in sink.messages] == ["what did we decide about the deploy?"]

    async def test_url_verification_is_answered(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        payload = load_payload("url_verification")
        response = await handler.handle(*signed_json(payload))
        assert response.status == 200
        assert json.loads(response.body) == {"challenge": payload["challenge"]}
        assert response.content_type.startswith("application/json")
        assert sink.messages == []

    async def test_url_verification_needs_the_signature_too(
        self, handler: SlackWebhookHandler
    ) -> None:
        with pytest.raises(WebhookVerificationError):
            await handler.handle(*signed_json(load_payload("url_verification"), secret="wrong"))

    async def test_app_rate_limited_notice_is_acknowledged(
        self, handler: SlackWebhookHandler, sink: Sink, fake_slack: FakeSlack
    ) -> None:
        response = await handler.handle(*signed_json(load_payload("app_rate_limited")))
        assert response.status == 200
        assert sink.messages == []
        assert fake_slack.calls == []

    async def test_signed_garbage_is_a_400(self, handler: SlackWebhookHandler, sink: Sink) -> None:
        body = b"{not json"
        headers = {k.lower(): v for k, v in sign(body).items()} | {
            "content-type": "application/json"
        }
        response = await handler.handle(headers, body)
        assert response.status == 400
        assert sink.messages == []

    @pytest.mark.parametrize(
        "timestamp", ["\u00b2", "1" * 5000, "\u0661\u0662", " 12", "12\n", "-12", "+12", "1.5"]
    )
    async def test_timestamp_that_is_not_plain_digits_is_a_401(
        self, handler: SlackWebhookHandler, sink: Sink, fake_slack: FakeSlack, timestamp: str
    ) -> None:
        headers, body = signed_json(load_payload("app_mention"))
        headers["x-slack-request-timestamp"] = timestamp
        with pytest.raises(WebhookVerificationError, match="malformed") as caught:
            await handler.handle(headers, body)
        assert caught.value.status_code == 401
        assert sink.messages == []
        assert fake_slack.calls == []

    @pytest.mark.parametrize(
        ("body", "content_type"),
        [
            (b"null", "application/json"),
            (b"[1, 2]", "application/json"),
            (b"42", "application/json"),
            (b'"text"', "application/json"),
            (b"payload=null", "application/x-www-form-urlencoded"),
            (b"payload=%5B%5D", "application/x-www-form-urlencoded"),
        ],
    )
    async def test_signed_json_that_is_not_an_object_is_a_400(
        self, handler: SlackWebhookHandler, sink: Sink, body: bytes, content_type: str
    ) -> None:
        headers = {k.lower(): v for k, v in sign(body).items()} | {"content-type": content_type}
        response = await handler.handle(headers, body)
        assert response.status == 400
        assert json.loads(response.body) == {"error": "request body is JSON but not an object"}
        assert sink.messages == []


class TestEvents:
    async def test_dm_through_bolt(
        self, handler: SlackWebhookHandler, sink: Sink, fake_slack: FakeSlack
    ) -> None:
        response = await handler.handle(*signed_json(load_payload("message_im")))
        assert (response.status, response.body) == (200, b"")
        (inbound,) = sink.messages
        assert inbound.model_dump(
            include={
                "platform",
                "bot_name",
                "chat_id",
                "chat_type",
                "thread_id",
                "message_id",
                "sender_id",
                "sender_name",
                "addressed",
                "event",
            }
        ) == {
            "platform": "slack",
            "bot_name": "default",
            "chat_id": "D0ALICE01",
            "chat_type": "private",
            "thread_id": "",
            "message_id": "D0ALICE01:1732799000.000100",
            "sender_id": "U0ALICE",
            "sender_name": "Alice",
            "addressed": True,
            "event": "message",
        }
        assert [c.method for c in fake_slack.calls] == ["auth.test", "users.info"]
        assert fake_slack.calls[0].token == BOT_TOKEN

    async def test_names_are_looked_up_once(
        self, handler: SlackWebhookHandler, sink: Sink, fake_slack: FakeSlack
    ) -> None:
        await handler.handle(*signed_json(load_payload("message_channel")))
        again = load_payload("message_channel")
        again["event_id"] = "Ev0CH000002"
        again["event"]["ts"] = "1732799101.000201"
        await handler.handle(*signed_json(again))
        assert [m.sender_name for m in sink.messages] == ["Carol Chen", "Carol Chen"]
        assert len(fake_slack.calls_to("users.info")) == 1
        assert not sink.messages[0].addressed

    async def test_retried_event_is_stored_once(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        payload = load_payload("app_mention")
        first = await handler.handle(*signed_json(payload))
        retry = await handler.handle(*signed_json(payload, retry=1))
        assert (first.status, retry.status) == (200, 200)
        assert len(sink.messages) == 1

    async def test_mention_sent_as_app_mention_and_message_is_stored_once(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        await handler.handle(*signed_json(load_payload("app_mention")))
        await handler.handle(*signed_json(load_payload("message_mention")))
        assert [m.message_id for m in sink.messages] == ["C0GENERAL:1732799200.000300"]

    async def test_failed_store_is_a_503_and_the_retry_stores_it(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        sink.failures = 1
        payload = load_payload("app_mention")
        first = await handler.handle(*signed_json(payload))
        assert first.status == 503
        assert sink.messages == []
        retry = await handler.handle(*signed_json(payload, retry=1))
        assert retry.status == 200
        assert len(sink.messages) == 1

    async def test_retry_while_the_first_is_being_stored_waits_for_it(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        sink.gate = asyncio.Event()
        payload = load_payload("app_mention")
        first = asyncio.create_task(handler.handle(*signed_json(payload)))
        retry = asyncio.create_task(handler.handle(*signed_json(payload, retry=1)))
        await asyncio.sleep(0.05)
        sink.gate.set()
        responses = await asyncio.gather(first, retry)
        assert [r.status for r in responses] == [200, 200]
        assert len(sink.messages) == 1

    async def test_own_messages_are_not_stored_but_join_the_thread(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        own = load_payload("own_message")
        assert (await handler.handle(*signed_json(own))).status == 200
        assert sink.messages == []
        follow_up = load_payload("message_thread")
        follow_up["event"]["thread_ts"] = own["event"]["thread_ts"]
        await handler.handle(*signed_json(follow_up))
        (inbound,) = sink.messages
        assert inbound.addressed
        assert inbound.thread_id == own["event"]["thread_ts"]

    async def test_other_events_are_acknowledged_and_ignored(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        for name in ("reaction_added", "message_channel_join"):
            response = await handler.handle(*signed_json(load_payload(name)))
            assert response.status == 200
        assert sink.messages == []

    async def test_edit_and_delete(self, handler: SlackWebhookHandler, sink: Sink) -> None:
        await handler.handle(*signed_json(load_payload("message_changed")))
        await handler.handle(*signed_json(load_payload("message_deleted")))
        assert [(m.event, m.message_id) for m in sink.messages] == [
            ("edit", "C0GENERAL:1732799100.000200"),
            ("delete", "C0GENERAL:1732799100.000200"),
        ]

    async def test_disallowed_sender_costs_nothing(self, fake_slack: FakeSlack, sink: Sink) -> None:
        handler = SlackWebhookHandler(
            bot_config(fake_slack, allow_users=frozenset({"U0ALICE"})), sink
        )
        response = await handler.handle(*signed_json(load_payload("message_channel")))
        assert response.status == 200
        assert sink.messages == []
        assert fake_slack.calls_to("users.info") == []


class TestIdentity:
    async def test_unknown_identity_is_a_503_until_slack_answers(
        self, handler: SlackWebhookHandler, sink: Sink, fake_slack: FakeSlack
    ) -> None:
        fake_slack.fail_next("auth.test", SlackFailure(500, "internal_error"))
        await handler.initialize()  # logs, does not raise
        fake_slack.fail_next("auth.test", SlackFailure.api_error("service_unavailable"))
        response = await handler.handle(*signed_json(load_payload("app_mention")))
        assert (response.status, response.retry_after) == (503, RETRY_LATER_SECONDS)
        assert sink.messages == []
        response = await handler.handle(*signed_json(load_payload("app_mention"), retry=1))
        assert response.status == 200
        assert len(sink.messages) == 1
        assert len(fake_slack.calls_to("auth.test")) == 3


class TestSlashCommands:
    async def test_command_is_acknowledged_in_channel_and_stored(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        response = await handler.handle(*signed_form(load_payload("slash_command")))
        assert response.status == 200
        assert json.loads(response.body) == {"response_type": "in_channel"}
        (inbound,) = sink.messages
        assert (inbound.command, inbound.command_args, inbound.chat_id) == (
            "compress",
            "deploy plan",
            "C0GENERAL",
        )

    async def test_command_that_cannot_be_stored_tells_the_user(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        sink.failures = 1
        response = await handler.handle(*signed_form(load_payload("slash_command")))
        assert response.status == 200
        answer = json.loads(response.body)
        assert answer["response_type"] == "ephemeral"
        assert "try again" in answer["text"]

    async def test_unsigned_command_is_refused(
        self, handler: SlackWebhookHandler, sink: Sink
    ) -> None:
        headers, body = signed_form(load_payload("slash_command"))
        with pytest.raises(WebhookVerificationError):
            await handler.handle(headers, body + b"&text=other")
        assert sink.messages == []


class TestReceiveModes:
    def test_signing_secret_means_events_api(self, fake_slack: FakeSlack, sink: Sink) -> None:
        config = bot_config(fake_slack)
        assert isinstance(create_webhook(config, sink), SlackWebhookHandler)
        assert create_listener(config, sink) is None

    def test_app_token_means_socket_mode_and_no_webhook(
        self, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        config = bot_config(
            fake_slack, extra={"signing_secret": SIGNING_SECRET, "app_token": APP_TOKEN}
        )
        assert create_webhook(config, sink) is None
        assert isinstance(create_listener(config, sink), SlackSocketModeListener)

    def test_neither_is_a_clear_error(self, fake_slack: FakeSlack, sink: Sink) -> None:
        config = bot_config(fake_slack, extra={})
        with pytest.raises(ValueError, match=r"signing secret .* or an app-level token"):
            create_webhook(config, sink)
        assert create_listener(config, sink) is None

    def test_bot_token_is_required(self, sink: Sink) -> None:
        with pytest.raises(ValueError, match="no bot token"):
            create_webhook(BotConfig(platform="slack", extra={"signing_secret": "x"}), sink)
