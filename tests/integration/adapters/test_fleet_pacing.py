"""Several deliverers answering one bot share its rate limits: no 429, every message once.

Each deliverer here has its own scheduler, as separate workers do; they share Redis (or,
embedded, this process). The fake platforms enforce the limits, so a missing or broken
share shows up as 429s they answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from adapters.base import BotConfig, Deliverer, DeliveryError
from adapters.discord import DiscordDeliverer
from adapters.messages import ChatTarget, OutboundMessage
from adapters.pacing import LocalScheduler, PacingConfig, Rate, waiting_at_most
from adapters.slack import SlackDeliverer
from adapters.telegram import TelegramDeliverer
from agent_core.config import DRAFT_MAX_WAIT_SECONDS
from tests.fixtures.pacing import paced
from tests.fixtures.platform_servers.discord import DM_ID, FakeDiscord
from tests.fixtures.platform_servers.flood import Window
from tests.fixtures.platform_servers.slack import BOT_TOKEN, FakeSlack
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramFailure,
    TelegramServerThread,
)
from tests.fixtures.services import free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PRIVATE = "111111111"
GROUP = "-1009876543210"
WAIT_BOUND_SECONDS = 60.0
"""How long a wait in these tests may take on a loaded machine before it fails."""


@pytest.fixture(scope="module")
def _telegram_server() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


@pytest.fixture
def telegram(_telegram_server: FakeTelegram) -> Iterator[FakeTelegram]:
    _telegram_server.reset()
    # A short group window keeps the test short; the pacer is told the same.
    _telegram_server.flood.windows["group"] = Window(3, 4.0)
    yield _telegram_server
    _telegram_server.reset()


def telegram_pacing(redis_url: str | None) -> PacingConfig:
    default = paced("telegram", redis_url=redis_url)
    return PacingConfig(
        limits={**default.limits, "group": Rate(3, 4.0)},
        max_wait_seconds=WAIT_BOUND_SECONDS,
        redis_url=redis_url,
    )


def telegram_reply(text: str, chat_id: str) -> OutboundMessage:
    chat_type = "group" if chat_id.startswith("-") else "private"
    return OutboundMessage(
        platform="telegram", chat_id=chat_id, chat_type=chat_type, text=text, delivery_id=text
    )


@pytest.fixture
async def workers(
    telegram: FakeTelegram, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[[PacingConfig], Any]]:
    """Opens deliverers of the fake's bot, each with its own scheduler (as two workers)."""
    async with AsyncExitStack() as stack:

        async def open_worker(pacing: PacingConfig) -> TelegramDeliverer:
            config = BotConfig(
                platform="telegram", token=TOKEN, api_base=telegram.api_base, pacing=pacing
            )
            deliverer = await stack.enter_async_context(TelegramDeliverer(config))
            assert isinstance(deliverer, TelegramDeliverer)
            return deliverer

        yield open_worker


async def deliver_all(deliverers: list[Deliverer], replies: list[OutboundMessage]) -> None:
    """Every reply at once, taken in turn by the deliverers."""
    await asyncio.gather(
        *(deliverers[i % len(deliverers)].deliver(r) for i, r in enumerate(replies))
    )


def busy_chat_and_group() -> list[OutboundMessage]:
    return [telegram_reply(f"private {i}", PRIVATE) for i in range(4)] + [
        telegram_reply(f"group {i}", GROUP) for i in range(6)
    ]


def assert_each_once(telegram: FakeTelegram, replies: list[OutboundMessage]) -> None:
    for chat in (PRIVATE, GROUP):
        texts = [m["text"] for m in telegram.sent_messages(chat)]
        expected = [r.text for r in replies if r.chat_id == chat]
        assert sorted(texts) == sorted(expected), "every message delivered, once"


@pytest.mark.parametrize("shared", ["redis", "in-process"])
async def test_two_workers_answering_one_chat_and_one_group_trip_no_flood_control(
    telegram: FakeTelegram,
    workers: Callable[[PacingConfig], Any],
    redis_url: str,
    shared: str,
) -> None:
    pacing = telegram_pacing(redis_url if shared == "redis" else None)
    first, second = await workers(pacing), await workers(pacing)
    assert first.pacer.scheduler is not second.pacer.scheduler or shared == "in-process"
    replies = busy_chat_and_group()
    await deliver_all([first, second], replies)
    assert telegram.rate_limited == 0
    assert_each_once(telegram, replies)


async def test_without_a_shared_scheduler_the_same_load_trips_flood_control(
    telegram: FakeTelegram, workers: Callable[[PacingConfig], Any]
) -> None:
    first, second = await workers(telegram_pacing(None)), await workers(telegram_pacing(None))
    first.pacer.scheduler, second.pacer.scheduler = LocalScheduler(), LocalScheduler()
    replies = busy_chat_and_group()
    await deliver_all([first, second], replies)
    assert telegram.rate_limited > 0, "the fake enforces the limits the pacer keeps"
    assert_each_once(telegram, replies)  # 429s are waited out by each deliverer


async def test_a_429_seen_by_one_worker_makes_the_other_wait(
    telegram: FakeTelegram, workers: Callable[[PacingConfig], Any], redis_url: str
) -> None:
    first, second = (
        await workers(telegram_pacing(redis_url)),
        await workers(telegram_pacing(redis_url)),
    )
    telegram.fail_next("sendMessage", TelegramFailure.rate_limited(3))
    flooded = asyncio.create_task(first.deliver(telegram_reply("first", PRIVATE)))
    await asyncio.to_thread(
        wait_until,
        lambda: telegram.calls("sendMessage"),
        timeout=WAIT_BOUND_SECONDS,
        what="the 429",
    )
    refused_at = telegram.calls("sendMessage")[0].at
    await second.deliver(telegram_reply("second", PRIVATE))
    await flooded
    (second_call,) = [c for c in telegram.calls("sendMessage") if c.params.get("text") == "second"]
    assert second_call.at - refused_at >= 3.0 - 0.05, "the other worker waited out the 429"
    assert telegram.rate_limited == 0
    assert sorted(telegram.messages(PRIVATE)) == ["first", "second"]


async def test_redis_unavailable_still_delivers_paced_in_process(
    telegram: FakeTelegram,
    workers: Callable[[PacingConfig], Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = f"redis://127.0.0.1:{free_port()}/0"
    first, second = await workers(telegram_pacing(gone)), await workers(telegram_pacing(gone))
    replies = busy_chat_and_group()
    with caplog.at_level(logging.WARNING, logger="adapters.pacing"):
        await deliver_all([first, second], replies)
    assert "unavailable" in caplog.text
    assert telegram.rate_limited == 0
    assert_each_once(telegram, replies)


@pytest.mark.usefixtures("_restore_discord_globals")
async def test_two_discord_workers_share_a_channels_bucket(
    fake: FakeDiscord, redis_url: str
) -> None:
    async with AsyncExitStack() as stack:
        deliverers: list[Deliverer] = []
        for _ in range(2):
            config = BotConfig(
                platform="discord",
                token=fake.token,
                api_base=fake.base_url,
                pacing=paced("discord", redis_url=redis_url),
            )
            deliverers.append(await stack.enter_async_context(DiscordDeliverer(config)))
        replies = [
            OutboundMessage(platform="discord", chat_id=DM_ID, text=f"part {i}", delivery_id=str(i))
            for i in range(8)
        ]
        await deliver_all(deliverers, replies)
    assert fake.flood.refused == 0
    assert sorted(m.content for m in fake.sent_messages(DM_ID)) == sorted(r.text for r in replies)


async def test_two_slack_workers_share_a_channels_rate(
    fake_slack: FakeSlack, redis_url: str
) -> None:
    deliverers: list[Deliverer] = [
        SlackDeliverer(
            BotConfig(
                platform="slack",
                token=BOT_TOKEN,
                api_base=fake_slack.api_base,
                pacing=paced("slack", redis_url=redis_url),
            )
        )
        for _ in range(2)
    ]
    replies = [
        OutboundMessage(platform="slack", chat_id="C0GENERAL", text=f"part {i}", delivery_id=str(i))
        for i in range(4)
    ]
    try:
        await deliver_all(deliverers, replies)
    finally:
        for deliverer in deliverers:
            await deliverer.pacer.close()
    assert fake_slack.flood.refused == 0
    assert sorted(p["text"] for p in fake_slack.posted("C0GENERAL")) == sorted(
        r.text for r in replies
    )


async def test_a_streamed_draft_counts_against_the_same_buckets_and_waits_briefly(
    telegram: FakeTelegram, workers: Callable[[PacingConfig], Any], redis_url: str
) -> None:
    first, second = (
        await workers(telegram_pacing(redis_url)),
        await workers(telegram_pacing(redis_url)),
    )
    await deliver_all([first], [telegram_reply(f"group {i}", GROUP) for i in range(3)])
    posted = len(telegram.calls("sendMessage"))
    target = ChatTarget(platform="telegram", chat_id=GROUP, chat_type="group")
    with pytest.raises(DeliveryError) as caught:
        await waiting_at_most(DRAFT_MAX_WAIT_SECONDS, second.post_draft(target, "drafting"))
    assert caught.value.retryable
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > DRAFT_MAX_WAIT_SECONDS, "the group's window is full"
    assert len(telegram.calls("sendMessage")) == posted, "nothing was sent"
    assert telegram.rate_limited == 0
