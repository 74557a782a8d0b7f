"""Telegram sends whose answer is lost are never repeated; those that never left are retried.

The real PTB client against the local Bot API, which can post a message and then answer
after the client gave up, or drop the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.base import BotConfig, DeliveryError
from adapters.messages import ChatTarget, OutboundMessage
from adapters.telegram import TelegramDeliverer
from tests.fixtures.platform_servers.faults import CLIENT_TIMEOUT_SECONDS, AfterPost
from tests.fixtures.platform_servers.telegram import TOKEN, FakeTelegram, TelegramServerThread
from tests.fixtures.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CHAT = "111111111"
LONG = "\n\n".join(["A paragraph of a long answer that keeps going. " * 12] * 12)


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


@pytest.fixture
def telegram(_server: FakeTelegram) -> Iterator[FakeTelegram]:
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture
async def deliverer(telegram: FakeTelegram) -> AsyncIterator[TelegramDeliverer]:
    config = BotConfig(platform="telegram", token=TOKEN, api_base=telegram.api_base)
    async with TelegramDeliverer(config) as opened:
        assert isinstance(opened, TelegramDeliverer)
        opened.send_timeout_seconds = CLIENT_TIMEOUT_SECONDS
        yield opened


def reply(text: str = "the answer", **fields: Any) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=CHAT, text=text, delivery_id="7", **fields)


@pytest.mark.parametrize(
    "fault",
    [AfterPost.answer_late(), AfterPost.drop_connection()],
    ids=["answered-after-the-timeout", "connection-dropped"],
)
async def test_a_send_whose_answer_is_lost_is_unknown_and_never_repeated(
    telegram: FakeTelegram, deliverer: TelegramDeliverer, fault: AfterPost
) -> None:
    telegram.after_next("sendMessage", fault)
    with pytest.raises(DeliveryError, match="may or may not have posted") as caught:
        await deliverer.deliver(reply())
    assert len(telegram.sent_messages()) == 1, "Telegram did post it"
    error = caught.value
    assert (error.maybe_sent, error.retryable, error.delivered_chunks) == (True, False, 0)
    assert len(telegram.calls("sendMessage")) == 1


async def test_a_lost_answer_after_a_delivered_chunk_keeps_that_chunk(
    telegram: FakeTelegram, deliverer: TelegramDeliverer
) -> None:
    telegram.after_next("sendMessage", None, AfterPost.drop_connection())
    with pytest.raises(DeliveryError) as caught:
        await deliverer.deliver(reply(LONG))
    first, _second = telegram.sent_messages()
    assert caught.value.maybe_sent is True
    assert caught.value.delivered_ids == (f"{CHAT}:{first['_message_id']}",)


async def test_an_interrupted_attempt_is_unknown_and_nothing_is_sent(
    telegram: FakeTelegram, deliverer: TelegramDeliverer
) -> None:
    with pytest.raises(DeliveryError, match="interrupted") as caught:
        await deliverer.deliver(reply(unsettled_since=datetime.now(UTC)))
    assert (caught.value.maybe_sent, caught.value.retryable) == (True, False)
    assert telegram.calls("sendMessage") == []


async def test_an_interrupted_attempt_past_the_drafts_is_unknown_and_nothing_more_is_sent(
    telegram: FakeTelegram, deliverer: TelegramDeliverer
) -> None:
    """A reply longer than its drafts: the attempt that died may have sent the chunks past
    them, so the next one edits the draft and sends nothing."""
    draft = await deliverer.post_draft(ChatTarget(platform="telegram", chat_id=CHAT), "A")
    died = reply(LONG, streamed_ids=(draft,))
    await deliverer.deliver(died)  # a worker died before recording this
    sent = len(telegram.sent_messages())

    with pytest.raises(DeliveryError, match="interrupted") as caught:
        await deliverer.deliver(died.model_copy(update={"unsettled_since": datetime.now(UTC)}))
    assert (caught.value.maybe_sent, caught.value.retryable) == (True, False)
    assert caught.value.delivered_ids == (draft,)
    assert len(telegram.sent_messages()) == sent, "the chunks past the draft are not sent again"


async def test_a_refused_connection_proves_nothing_was_sent() -> None:
    config = BotConfig(
        platform="telegram", token=TOKEN, api_base=f"http://127.0.0.1:{free_port()}/bot"
    )
    deliverer = TelegramDeliverer(config)  # not initialised: getMe would fail the same way
    try:
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply())
    finally:
        await deliverer.shutdown()
    assert (caught.value.retryable, caught.value.maybe_sent) == (True, False)
