from __future__ import annotations

import asyncio

import pytest

from adapters.slack.dedupe import Ledger, StillInProgress
from adapters.slack.ids import MessageRef, command_key, is_ts, message_key, parse_key
from adapters.slack.threads import ThreadTracker

pytestmark = pytest.mark.anyio


class TestIds:
    def test_round_trip(self) -> None:
        key = message_key("C0GENERAL", "1732799200.000300")
        assert key == "C0GENERAL:1732799200.000300"
        assert parse_key(key) == MessageRef("C0GENERAL", "1732799200.000300")

    def test_command_ids_name_no_message(self) -> None:
        key = command_key("C0GENERAL", "1334.7384.abc")
        assert parse_key(key) == MessageRef("C0GENERAL", None)

    @pytest.mark.parametrize("key", [None, "", "nochannel", ":1732799200.000300"])
    def test_unparseable(self, key: str | None) -> None:
        assert parse_key(key) is None

    def test_is_ts(self) -> None:
        assert is_ts("1732799200.000300")
        assert not is_ts("cmd:123")
        assert not is_ts("1732799200")
        assert not is_ts(None)


class TestLedger:
    async def test_first_attempt_does_the_work_copies_do_not(self) -> None:
        ledger = Ledger()
        async with ledger.attempt("Ev1") as fresh:
            assert fresh
        async with ledger.attempt("Ev1") as fresh:
            assert not fresh
        async with ledger.attempt("Ev2") as fresh:
            assert fresh

    async def test_none_key_is_always_fresh(self) -> None:
        ledger = Ledger()
        for _ in range(2):
            async with ledger.attempt(None) as fresh:
                assert fresh

    async def test_failed_attempt_releases_the_key(self) -> None:
        ledger = Ledger()

        async def failing() -> None:
            async with ledger.attempt("Ev1") as fresh:
                assert fresh
                raise RuntimeError("database down")

        with pytest.raises(RuntimeError, match="database down"):
            await failing()
        async with ledger.attempt("Ev1") as fresh:
            assert fresh

    async def test_copy_waits_for_the_first_attempt(self) -> None:
        ledger = Ledger(wait=5)
        started, release = asyncio.Event(), asyncio.Event()
        order: list[str] = []

        async def first() -> None:
            async with ledger.attempt("Ev1") as fresh:
                assert fresh
                started.set()
                await release.wait()
                order.append("first stored")

        async def copy() -> None:
            await started.wait()
            async with ledger.attempt("Ev1") as fresh:
                order.append(f"copy fresh={fresh}")

        tasks = [asyncio.create_task(first()), asyncio.create_task(copy())]
        await started.wait()
        release.set()
        await asyncio.gather(*tasks)
        assert order == ["first stored", "copy fresh=False"]

    async def test_copy_takes_over_when_the_first_attempt_fails(self) -> None:
        ledger = Ledger(wait=5)
        started, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with ledger.attempt("Ev1"):
                started.set()
                await release.wait()
                raise RuntimeError("database down")

        async def copy() -> bool:
            await started.wait()
            async with ledger.attempt("Ev1") as fresh:
                return fresh

        failing = asyncio.create_task(first())
        taking_over = asyncio.create_task(copy())
        await started.wait()
        release.set()
        with pytest.raises(RuntimeError):
            await failing
        assert await taking_over is True

    async def test_copy_gives_up_while_the_first_is_still_running(self) -> None:
        ledger = Ledger(wait=0.01)
        release = asyncio.Event()
        started = asyncio.Event()

        async def first() -> None:
            async with ledger.attempt("Ev1"):
                started.set()
                await release.wait()

        task = asyncio.create_task(first())
        await started.wait()
        with pytest.raises(StillInProgress):
            async with ledger.attempt("Ev1"):
                pass
        release.set()
        await task
        async with ledger.attempt("Ev1") as fresh:
            assert not fresh

    async def test_keys_expire(self) -> None:
        now = [0.0]
        ledger = Ledger(ttl=10, clock=lambda: now[0])
        async with ledger.attempt("Ev1"):
            pass
        now[0] = 11
        async with ledger.attempt("Ev1") as fresh:
            assert fresh

    async def test_size_is_bounded_but_work_under_way_is_kept(self) -> None:
        ledger = Ledger(max_keys=3)
        release = asyncio.Event()
        started = asyncio.Event()

        async def slow() -> None:
            async with ledger.attempt("slow"):
                started.set()
                await release.wait()

        task = asyncio.create_task(slow())
        await started.wait()
        for i in range(10):
            async with ledger.attempt(f"Ev{i}"):
                pass
        assert len(ledger._entries) <= 4
        assert "slow" in ledger._entries
        release.set()
        await task


class TestThreadTracker:
    def test_remembers_recent_threads(self) -> None:
        threads = ThreadTracker(max_threads=2)
        threads.joined("C1", "1.1")
        threads.joined("C1", "2.2")
        assert threads.has_joined("C1", "1.1")
        threads.joined("C2", "3.3")  # evicts the least recently used: C1/2.2
        assert threads.has_joined("C1", "1.1")
        assert not threads.has_joined("C1", "2.2")
        assert not threads.has_joined("C2", "1.1")
