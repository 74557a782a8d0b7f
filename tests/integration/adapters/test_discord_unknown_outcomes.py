"""Discord posts whose answer is lost are settled by their enforced nonce, never duplicated.

discord.py's own HTTP client against the local Discord, which can create a message and
then answer late or drop the connection, and which enforces nonces as Discord does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.base import BotConfig, DeliveryError
from adapters.discord import DiscordDeliverer
from adapters.messages import OutboundMessage
from tests.fixtures.platform_servers.discord import (
    GENERAL_ID,
    Failure,
    FakeDiscord,
    load_payload,
    running_fake_discord,
)
from tests.fixtures.platform_servers.faults import CLIENT_TIMEOUT_SECONDS, AfterPost

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

TRIGGER = load_payload("message_create_mention")
TWO_PARTS = "\n\n".join(["first part " * 150, "second part " * 150])


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with running_fake_discord() as server:
        server.push("MESSAGE_CREATE", TRIGGER)
        yield server


@pytest.fixture
async def deliverer(fake: FakeDiscord) -> AsyncIterator[DiscordDeliverer]:
    config = BotConfig(platform="discord", token=fake.token, api_base=fake.base_url)
    async with DiscordDeliverer(config) as opened:
        assert isinstance(opened, DiscordDeliverer)
        opened.post_timeout_seconds = CLIENT_TIMEOUT_SECONDS
        yield opened


def reply(text: str = "the answer", **fields: Any) -> OutboundMessage:
    values: dict[str, Any] = {
        "platform": "discord",
        "chat_id": GENERAL_ID,
        "chat_type": "group",
        "reply_to_message_id": TRIGGER["id"],
        "delivery_id": "41",
    }
    return OutboundMessage(text=text, **(values | fields))


def again(message: OutboundMessage, error: DeliveryError, since: datetime) -> OutboundMessage:
    """The next attempt, as the delivery service builds it from what the error said."""
    return message.model_copy(
        update={
            "delivered_chunks": error.delivered_chunks,
            "delivered_ids": error.delivered_ids,
            "unsettled_since": since,
        }
    )


@pytest.mark.parametrize(
    "fault",
    [AfterPost.answer_late(), AfterPost.drop_connection()],
    ids=["answered-after-the-timeout", "connection-dropped"],
)
async def test_a_lost_answer_is_settled_by_the_nonce_without_a_second_message(
    fake: FakeDiscord, deliverer: DiscordDeliverer, fault: AfterPost
) -> None:
    message = reply(TWO_PARTS)
    started = datetime.now(UTC)
    fake.after_next(None, fault)
    with pytest.raises(DeliveryError) as caught:
        await deliverer.deliver(message)
    error = caught.value
    assert (error.maybe_sent, error.retryable, error.delivered_chunks) == (True, True, 1)
    assert len(fake.sent_messages()) == 2, "Discord created the second part"

    ids = await deliverer.deliver(again(message, error, started))
    assert [m.message["id"] for m in fake.sent_messages()] == ids, "no part twice"
    assert len(fake.attempts) == 3, "only the unsettled part was posted again"
    assert fake.attempts[2]["body"]["nonce"] == fake.attempts[1]["body"]["nonce"]


async def test_an_interrupted_attempt_is_finished_without_repeating_its_parts(
    fake: FakeDiscord, deliverer: DiscordDeliverer
) -> None:
    message = reply(TWO_PARTS)
    first = await deliverer.deliver(message)  # a worker died before recording this
    ids = await deliverer.deliver(message.model_copy(update={"unsettled_since": datetime.now(UTC)}))
    assert ids == first
    assert len(fake.sent_messages()) == 2


async def test_past_the_nonce_window_nothing_is_resent(
    fake: FakeDiscord, deliverer: DiscordDeliverer
) -> None:
    long_ago = datetime.now(UTC) - timedelta(seconds=deliverer.nonce_window_seconds + 1)
    with pytest.raises(DeliveryError, match="longer ago than Discord") as caught:
        await deliverer.deliver(reply(unsettled_since=long_ago))
    assert (caught.value.maybe_sent, caught.value.retryable) == (True, False)
    assert fake.attempts == []


async def test_a_failed_resend_leaves_the_outcome_unsettled(
    fake: FakeDiscord, deliverer: DiscordDeliverer
) -> None:
    fake.fail_next(Failure.forbidden())
    with pytest.raises(DeliveryError) as caught:
        await deliverer.deliver(reply(unsettled_since=datetime.now(UTC)))
    assert caught.value.maybe_sent is True, "a refused resend says nothing of the first post"
    assert caught.value.retryable is False
