"""The Redis scheduler does the in-process scheduler's arithmetic, and survives Redis going away."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from adapters.pacing import (
    Bucket,
    FallbackScheduler,
    LocalScheduler,
    Rate,
    RedisScheduler,
    Scheduler,
)
from tests.fixtures.restartable import PrivateRedis

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PER_SECOND = Rate(1, 1.0)
BOT = Bucket("bot", Rate(30, 1.0))
GROUP = Bucket("group:g", Rate(3, 60.0))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def near(expected: object) -> Any:
    return pytest.approx(expected, abs=1e-3)


@pytest.fixture(params=["local", "redis"])
async def schedulers(
    request: pytest.FixtureRequest, redis_url: str
) -> AsyncIterator[tuple[Clock, Callable[[], Scheduler]]]:
    """A clock and a factory of schedulers that share state (one Redis, or one process)."""
    clock = Clock()
    made: list[Scheduler] = []
    local = LocalScheduler(clock)

    def make() -> Scheduler:
        scheduler: Scheduler = (
            local if request.param == "local" else RedisScheduler(redis_url, clock=clock)
        )
        made.append(scheduler)
        return scheduler

    yield clock, make
    for scheduler in made:
        await scheduler.close()


async def test_two_schedulers_share_each_bucket(
    schedulers: tuple[Clock, Callable[[], Scheduler]],
) -> None:
    clock, make = schedulers
    first, second = make(), make()
    chat = Bucket("chat:a", PER_SECOND)
    waits = [(await s.reserve([BOT, chat], 60)).wait for s in (first, second, first, second)]
    assert waits == near([0.0, 1.0, 2.0, 3.0])
    # The bot bucket is not held up by one chat's queue: another chat goes at once.
    assert (await second.reserve([BOT, Bucket("chat:b", PER_SECOND)], 60)).wait == near(0.0)
    clock.now += 10
    assert (await first.reserve([BOT, chat], 60)).wait == near(0.0)


async def test_a_group_window_and_the_bound(
    schedulers: tuple[Clock, Callable[[], Scheduler]],
) -> None:
    clock, make = schedulers
    first, second = make(), make()
    for scheduler in (first, second, first):
        assert (await scheduler.reserve([GROUP], 5)).granted
    refused = await second.reserve([GROUP], 5)
    assert not refused.granted
    assert refused.wait == near(60.0)
    assert (await first.reserve([GROUP], 5)).wait == near(60.0)  # the refusal took nothing
    clock.now += 61
    assert (await second.reserve([GROUP], 5)).wait == near(0.0)


async def test_a_block_from_one_holds_back_the_other(
    schedulers: tuple[Clock, Callable[[], Scheduler]],
) -> None:
    _, make = schedulers
    first, second = make(), make()
    chat = Bucket("chat:a", PER_SECOND)
    await first.block(["chat:a"], 4.0)
    assert (await second.reserve([BOT, chat], 60)).wait == near(4.0)
    assert (await second.reserve([BOT], 60)).wait == near(0.0)


async def test_redis_down_paces_in_process_then_goes_back(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    shared = RedisScheduler(private_redis.url)
    local = LocalScheduler(clock)
    scheduler = FallbackScheduler(shared, local, clock=clock)
    chat = Bucket("chat:a", PER_SECOND)
    try:
        assert (await scheduler.reserve([chat], 60)).granted
        assert not scheduler.degraded
        private_redis.stop()
        with caplog.at_level(logging.WARNING, logger="adapters.pacing"):
            reservation = await scheduler.reserve([chat], 60)
        assert reservation.granted
        assert reservation.wait == near(0.0)  # paced here: this process saw no call yet
        assert scheduler.degraded
        assert "unavailable" in caplog.text
        assert (await scheduler.reserve([chat], 60)).wait == near(1.0)
        private_redis.start()
        clock.now += 60  # past the retry interval: Redis is asked again
        assert (await scheduler.reserve([chat], 60)).granted
        assert not scheduler.degraded
    finally:
        await scheduler.close()
