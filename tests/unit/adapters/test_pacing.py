"""The scheduler's arithmetic: sliding windows, several buckets at once, blocks, the bound."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.pacing import (
    EPSILON,
    BotPacer,
    Bucket,
    LocalScheduler,
    PaceExceeded,
    PacingConfig,
    Rate,
    earliest_slot,
    fits,
    parse_limits,
    waiting_at_most,
    waiting_in_all_at_most,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def near(expected: object) -> Any:
    """Equal but for the microsecond a slot adds after the window it waits out."""
    return pytest.approx(expected, abs=1e-3)


PER_SECOND = Rate(1, 1.0)
THREE_PER_MINUTE = Rate(3, 60.0)


def test_rates_read_the_limits_notation() -> None:
    assert Rate.parse("30/second") == Rate(30, 1.0)
    assert Rate.parse("20/minute") == Rate(20, 60.0)
    assert Rate.parse("5/5 seconds") == Rate(5, 5.0)
    assert parse_limits({"chat": "1/second", "group": "off"}) == {"chat": Rate(1, 1.0)}
    with pytest.raises(ValueError):
        Rate.parse("fast")


def test_a_window_allows_its_burst_then_one_per_freed_place() -> None:
    assert fits([], THREE_PER_MINUTE, 10.0)
    assert fits([10.0, 11.0], THREE_PER_MINUTE, 12.0)
    assert not fits([10.0, 11.0, 12.0], THREE_PER_MINUTE, 13.0)
    assert fits([10.0, 11.0, 12.0], THREE_PER_MINUTE, 70.0 + EPSILON)
    # A slot before reserved future ones counts in their windows too.
    assert not fits([30.0, 31.0, 32.0], THREE_PER_MINUTE, 13.0)
    logs = [([10.0, 11.0, 12.0], THREE_PER_MINUTE)]
    assert earliest_slot(logs, 13.0) == near(70.0)
    assert earliest_slot([([], PER_SECOND)], 99.0) == 99.0


def test_the_earliest_slot_fits_every_bucket_at_once() -> None:
    chat = ([5.0], PER_SECOND)
    group = ([0.0, 1.0, 2.0], THREE_PER_MINUTE)
    assert earliest_slot([chat], 5.5) == near(6.0)
    assert earliest_slot([chat, group], 5.5) == near(60.0)
    # A gap between future slots is used when it is wide enough.
    assert earliest_slot([([5.0, 8.0], PER_SECOND)], 5.0) == near(6.0)
    assert earliest_slot([([5.0, 6.5], PER_SECOND)], 5.0) == near(7.5)


def test_one_reservation_takes_the_latest_slot_of_all_its_buckets() -> None:
    clock = Clock()
    scheduler = LocalScheduler(clock)
    bot, chat_a, chat_b = (
        Bucket("bot", Rate(30, 1.0)),
        Bucket("chat:a", PER_SECOND),
        Bucket("chat:b", PER_SECOND),
    )
    waits = [scheduler.reserve_now([bot, chat_a], 60).wait for _ in range(3)]
    assert waits == near([0.0, 1.0, 2.0])
    # Another chat is free at once; the bot bucket has room for it.
    assert scheduler.reserve_now([bot, chat_b], 60).wait == 0.0
    clock.now += 2.5
    assert scheduler.reserve_now([bot, chat_a], 60).wait == near(0.5)


def test_a_slot_past_the_bound_reserves_nothing() -> None:
    clock = Clock()
    scheduler = LocalScheduler(clock)
    group = Bucket("group:g", THREE_PER_MINUTE)
    for _ in range(3):
        assert scheduler.reserve_now([group], 5).granted
    refused = scheduler.reserve_now([group], 5)
    assert not refused.granted
    assert refused.wait == near(60.0)
    # Nothing was taken by the refusal: the same answer again.
    assert scheduler.reserve_now([group], 5).wait == near(60.0)
    clock.now += 60
    assert scheduler.reserve_now([group], 5).wait == 0.0


async def test_a_block_holds_back_only_its_buckets() -> None:
    clock = Clock()
    scheduler = LocalScheduler(clock)
    chat_a, chat_b = Bucket("chat:a", PER_SECOND), Bucket("chat:b", PER_SECOND)
    await scheduler.block(["chat:a"], 7.0)
    assert (await scheduler.reserve([chat_a], 60)).wait == near(7.0)
    assert (await scheduler.reserve([chat_b], 60)).wait == 0.0
    # A shorter block later does not shorten it.
    await scheduler.block(["chat:b"], 3.0)
    await scheduler.block(["chat:b"], 1.0)
    assert (await scheduler.reserve([chat_b], 60)).wait == near(3.0)


async def test_the_pacer_sleeps_for_its_slot_or_refuses_unsent() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    config = PacingConfig(limits={"chat": PER_SECOND}, max_wait_seconds=1.5)
    pacer = BotPacer(config, "telegram:x", scheduler=LocalScheduler(clock), sleep=sleep)
    chat = pacer.bucket("chat", "42")
    assert pacer.bucket("group", "42") is None  # not limited: no bucket
    await pacer.acquire([chat])
    await pacer.acquire([chat, None])
    assert slept == near([1.0])
    await pacer.rate_limited([pacer.key("chat", "42")], 5.0)
    with pytest.raises(PaceExceeded) as refused:
        await pacer.acquire([chat])
    assert refused.value.wait == near(5.0)
    assert slept == near([1.0])


async def test_a_shorter_bound_applies_to_the_calls_made_under_it() -> None:
    clock = Clock()
    pacer = BotPacer(
        PacingConfig(limits={"chat": PER_SECOND}, max_wait_seconds=10),
        "slack:x",
        scheduler=LocalScheduler(clock),
    )
    chat = pacer.bucket("chat", "C1")
    await pacer.acquire([chat])
    with pytest.raises(PaceExceeded):
        await waiting_at_most(0.5, pacer.acquire([chat]))


async def test_drafts_fill_only_their_share_and_leave_the_rest_to_final_replies() -> None:
    clock = Clock()
    pacer = BotPacer(
        PacingConfig(limits={"chat.update": Rate(4, 60.0)}, max_wait_seconds=10),
        "slack:x",
        scheduler=LocalScheduler(clock),
    )
    method = pacer.bucket("chat.update")
    await waiting_at_most(0.5, pacer.acquire([method]), share=0.5)
    await waiting_at_most(0.5, pacer.acquire([method]), share=0.5)
    with pytest.raises(PaceExceeded):  # half of the minute's four is spent on drafts
        await waiting_at_most(0.5, pacer.acquire([method]), share=0.5)
    await waiting_at_most(0.5, pacer.acquire([method]))  # a final edit still goes
    await waiting_at_most(0.5, pacer.acquire([method]))
    with pytest.raises(PaceExceeded):
        await waiting_at_most(0.5, pacer.acquire([method]))


async def test_a_delivery_waits_in_all_at_most_its_budget() -> None:
    clock = Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    pacer = BotPacer(
        PacingConfig(limits={"chat": PER_SECOND}, max_wait_seconds=10),
        "telegram:x",
        scheduler=LocalScheduler(clock),
        sleep=sleep,
    )
    chat = pacer.bucket("chat", "42")

    async def three_chunks_at_once() -> None:
        await pacer.acquire([chat])
        await pacer.acquire([chat])
        await pacer.acquire([chat])

    await pacer.acquire([chat])
    # Each chunk waits a second: the budget holds two of them, not three.
    with pytest.raises(PaceExceeded):
        await waiting_in_all_at_most(2.5, three_chunks_at_once())
    await waiting_in_all_at_most(10, three_chunks_at_once())
