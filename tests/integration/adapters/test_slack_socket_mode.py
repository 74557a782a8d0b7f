"""Socket Mode through Bolt's handler and slack_sdk's aiohttp client, against the fake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError

from adapters.base import BotConfig
from adapters.messages import InboundMessage
from adapters.slack import SlackSocketModeListener
from tests.fixtures.platform_servers.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    FakeSlack,
    SlackFailure,
    load_payload,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


class Sink:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.failures = 0

    async def __call__(self, inbound: InboundMessage) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("database unavailable")
        self.messages.append(inbound)


async def eventually(predicate: Callable[[], Any], what: str, seconds: float = 10) -> Any:
    """Poll without blocking the loop the listener runs on."""
    try:
        async with asyncio.timeout(seconds):
            while not (value := predicate()):  # noqa: ASYNC110 (set by the fake's thread)
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
    return value


async def ack_of(fake: FakeSlack, envelope_id: str, seconds: float = 10) -> dict[str, Any]:
    acks: dict[str, dict[str, Any]] = fake.acks
    ack: dict[str, Any] = await eventually(
        lambda: acks.get(envelope_id), f"ack of {envelope_id}", seconds
    )
    return ack


@pytest.fixture
def sink() -> Sink:
    return Sink()


def listener_for(
    fake: FakeSlack, sink: Sink, app_token: str = APP_TOKEN
) -> SlackSocketModeListener:
    config = BotConfig(
        platform="slack", token=BOT_TOKEN, api_base=fake.api_base, extra={"app_token": app_token}
    )
    return SlackSocketModeListener(config, sink, ping_interval=0.5)


@pytest.fixture
async def running(fake_slack: FakeSlack, sink: Sink) -> AsyncIterator[SlackSocketModeListener]:
    listener = listener_for(fake_slack, sink)
    task = asyncio.create_task(listener.run())
    await eventually(lambda: fake_slack.socket_count == 1 and listener.connected.is_set(), "socket")
    yield listener
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: fake_slack.socket_count == 0, "socket closed")


class TestConnection:
    async def test_connects_with_the_app_token(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack
    ) -> None:
        (open_call,) = fake_slack.calls_to("apps.connections.open")
        assert open_call.token == APP_TOKEN
        assert [c.token for c in fake_slack.calls_to("auth.test")] == [BOT_TOKEN]

    async def test_refused_app_token_fails_the_run(self, fake_slack: FakeSlack, sink: Sink) -> None:
        listener = listener_for(fake_slack, sink, app_token="xapp-wrong")
        with pytest.raises(SlackApiError, match="invalid_auth"):
            await asyncio.wait_for(listener.run(), 10)
        assert fake_slack.socket_count == 0

    async def test_unknown_bot_token_fails_the_run(self, fake_slack: FakeSlack, sink: Sink) -> None:
        fake_slack.fail_next("auth.test", SlackFailure.api_error("invalid_auth"))
        with pytest.raises(Exception, match=r"auth\.test failed: invalid_auth"):
            await asyncio.wait_for(listener_for(fake_slack, sink).run(), 10)

    async def test_reconnects_when_slack_asks(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        fake_slack.request_disconnect()
        await eventually(lambda: len(fake_slack.calls_to("apps.connections.open")) == 2, "new url")
        await eventually(
            lambda: fake_slack.hellos >= 2 and fake_slack.socket_count == 1, "reconnect"
        )
        # An envelope sent while the client is still switching sockets may go unacked;
        # Slack then sends it again (retry_attempt 1), as it does in production.
        envelope = fake_slack.send_envelope(load_payload("message_im"))
        try:
            await ack_of(fake_slack, envelope, seconds=5)
        except AssertionError:
            retry = fake_slack.send_envelope(load_payload("message_im"), retry_attempt=1)
            await ack_of(fake_slack, retry)
        assert [m.chat_id for m in sink.messages] == ["D0ALICE01"]


class TestEnvelopes:
    async def test_event_is_stored_then_acknowledged(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        envelope = fake_slack.send_envelope(load_payload("app_mention"))
        ack = await ack_of(fake_slack, envelope)
        assert ack == {"envelope_id": envelope}
        (inbound,) = sink.messages
        assert (inbound.chat_id, inbound.addressed, inbound.text) == (
            "C0GENERAL",
            True,
            "what did we decide about the deploy?",
        )

    async def test_redelivered_envelope_is_stored_once(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        payload = load_payload("app_mention")
        await ack_of(fake_slack, fake_slack.send_envelope(payload))
        await ack_of(fake_slack, fake_slack.send_envelope(payload, retry_attempt=1))
        await ack_of(fake_slack, fake_slack.send_envelope(load_payload("message_mention")))
        assert len(sink.messages) == 1

    async def test_event_that_cannot_be_stored_is_not_acknowledged(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        sink.failures = 1
        payload = load_payload("message_im")
        failed = fake_slack.send_envelope(payload)
        await eventually(lambda: sink.failures == 0, "the failed attempt")
        # Slack redelivers an unacknowledged envelope; the redelivery is stored.
        redelivered = fake_slack.send_envelope(payload, retry_attempt=1)
        await ack_of(fake_slack, redelivered)
        assert failed not in fake_slack.acks
        assert len(sink.messages) == 1

    async def test_slash_command(
        self, running: SlackSocketModeListener, fake_slack: FakeSlack, sink: Sink
    ) -> None:
        envelope = fake_slack.send_envelope(load_payload("slash_command"), kind="slash_commands")
        ack = await ack_of(fake_slack, envelope)
        assert ack == {"envelope_id": envelope, "payload": {"response_type": "in_channel"}}
        (inbound,) = sink.messages
        assert (inbound.command, inbound.command_args) == ("compress", "deploy plan")
