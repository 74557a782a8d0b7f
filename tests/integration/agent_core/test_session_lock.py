"""The per-session lease on real Postgres and SQLite."""

from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.engine import (
    _gate_for,
    create_db_engine,
    make_session_factory,
    transaction,
    write_first,
)
from agent_core.db.models import SessionLock
from agent_core.sessions import lock
from agent_core.sessions.service import Conversation, get_or_create_session
from agent_core.tenancy.repository import TenancyRepository
from tests.fixtures.services import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = create_db_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def factory(engine: Engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


@pytest.fixture
def session_id(factory: sessionmaker[Session]) -> str:
    with transaction(factory) as db:
        bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
        chat = get_or_create_session(db, Conversation("default", bot.id, "webchat", "c1"))
        return chat.id


class TestLease:
    def test_second_holder_is_refused(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        assert lock.acquire(factory, session_id, lock.COMPACTION, "a", 30)
        assert not lock.acquire(factory, session_id, lock.COMPACTION, "b", 30)

    def test_holder_reacquires_and_kinds_are_independent(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        assert lock.acquire(factory, session_id, lock.COMPACTION, "a", 30)
        assert lock.acquire(factory, session_id, lock.COMPACTION, "a", 30)
        assert lock.acquire(factory, session_id, lock.TURN, "b", 30)

    def test_expired_lease_is_taken_over(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        assert lock.acquire(factory, session_id, lock.COMPACTION, "a", 0.3)
        time.sleep(0.4)
        assert lock.acquire(factory, session_id, lock.COMPACTION, "b", 30)
        assert not lock.renew(factory, session_id, lock.COMPACTION, "a", 30)
        assert not lock.release(factory, session_id, lock.COMPACTION, "a")
        assert not lock.acquire(factory, session_id, lock.COMPACTION, "c", 30)

    def test_release_by_non_holder_is_a_no_op(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        assert lock.acquire(factory, session_id, lock.COMPACTION, "a", 30)
        assert not lock.release(factory, session_id, lock.COMPACTION, "b")
        assert not lock.acquire(factory, session_id, lock.COMPACTION, "b", 30)
        assert lock.release(factory, session_id, lock.COMPACTION, "a")
        assert lock.acquire(factory, session_id, lock.COMPACTION, "b", 30)

    def test_keeper_renews_past_the_lease(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        with lock.held(factory, session_id, lock.TURN, "a", 0.3) as keeper:
            assert keeper is not None
            time.sleep(0.8)
            assert not lock.acquire(factory, session_id, lock.TURN, "b", 30)
            assert not keeper.lost
        assert lock.acquire(factory, session_id, lock.TURN, "b", 30)

    def test_held_yields_none_when_busy(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        assert lock.acquire(factory, session_id, lock.TURN, "a", 30)
        with lock.held(factory, session_id, lock.TURN, "b", 30) as keeper:
            assert keeper is None
        assert not lock.acquire(factory, session_id, lock.TURN, "c", 30), (
            "b did not release a's lease"
        )


class TestRaces:
    def test_many_threads_exactly_one_wins(
        self, factory: sessionmaker[Session], session_id: str
    ) -> None:
        barrier = threading.Barrier(16)
        wins: list[str] = []

        def contend(owner: str) -> None:
            barrier.wait()
            if lock.acquire(factory, session_id, lock.COMPACTION, owner, 30):
                wins.append(owner)

        threads = [threading.Thread(target=contend, args=(f"t{i}",)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1

    def test_processes_serialise_a_critical_section(self, db_url: str, session_id: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(3) as pool:
            results = pool.starmap(_critical_section_worker, [(db_url, session_id, 40)] * 3)
        assert sum(results) == 120
        engine = create_db_engine(db_url)
        try:
            with engine.connect() as conn:
                from sqlalchemy import text

                value = conn.execute(
                    text("SELECT summary FROM sessions WHERE id = :id"), {"id": session_id}
                ).scalar_one()
        finally:
            engine.dispose()
        assert int(value) == 120, "an unsynchronised read-modify-write would lose increments"

    def test_killed_holder_lease_expires(self, db_url: str, session_id: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        holder = ctx.Process(target=_hold_forever, args=(db_url, session_id))
        holder.start()
        engine = create_db_engine(db_url)
        factory = make_session_factory(engine)
        try:
            deadline = time.monotonic() + 60
            while _owner(factory, session_id) != "doomed":
                assert time.monotonic() < deadline, "holder never took the lease"
                time.sleep(0.05)
            holder.kill()
            holder.join()
            killed_at = time.monotonic()
            assert not lock.acquire(factory, session_id, lock.COMPACTION, "next", 30)
            time.sleep(max(0.0, HOLDER_LEASE + 0.3 - (time.monotonic() - killed_at)))
            assert lock.acquire(factory, session_id, lock.COMPACTION, "next", 30)
        finally:
            engine.dispose()


def _critical_section_worker(db_url: str, session_id: str, rounds: int) -> int:
    """Increment a counter stored as text with a deliberately racy read-then-write."""
    from sqlalchemy import text

    import agent_core  # noqa: F401

    engine = create_db_engine(db_url)
    factory = make_session_factory(engine)
    owner = uuid.uuid4().hex
    done = 0
    while done < rounds:
        if not lock.acquire(factory, session_id, lock.COMPACTION, owner, 30):
            time.sleep(0.001)
            continue
        with transaction(factory) as db:
            raw = db.execute(text("SELECT summary FROM sessions WHERE id=:id"), {"id": session_id})
            current = int(raw.scalar_one() or 0)
        with transaction(factory) as db:
            db.execute(
                text("UPDATE sessions SET summary=:v WHERE id=:id"),
                {"v": str(current + 1), "id": session_id},
            )
        lock.release(factory, session_id, lock.COMPACTION, owner)
        done += 1
    engine.dispose()
    return done


HOLDER_LEASE = 3.0
"""Long enough that a loaded machine still renews it well before it runs out."""


def _owner(factory: sessionmaker[Session], session_id: str) -> str | None:
    from sqlalchemy import select

    from agent_core.db.models import SessionLock

    with transaction(factory) as db:
        return db.scalar(
            select(SessionLock.owner).where(
                SessionLock.session_id == session_id, SessionLock.kind == lock.COMPACTION
            )
        )


def _hold_forever(db_url: str, session_id: str) -> None:
    import agent_core  # noqa: F401

    factory = make_session_factory(create_db_engine(db_url))
    while not lock.acquire(factory, session_id, lock.COMPACTION, "doomed", HOLDER_LEASE):
        time.sleep(0.05)
    with lock.LeaseKeeper(factory, session_id, lock.COMPACTION, "doomed", HOLDER_LEASE):
        time.sleep(3600)


BUSY_LEASE = 1.0
"""A lease renewed every 0.25 s, against writers that never pause."""
RENEWALS_TO_SEE = 8
WORK = text(
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) "
    "SELECT count(*) FROM n"
)
"""A few milliseconds of work inside a write transaction, like a turn's own statements."""


class TestBusySqlite:
    def test_a_renewal_gets_the_write_lock_among_writers_that_never_pause(
        self, sqlite_url: str
    ) -> None:
        """SQLite's own busy wait sleeps up to 100 ms between tries and is overtaken by
        writers that retake the lock at once; the renewal must still get its turn."""
        engine = create_db_engine(sqlite_url)
        factory = make_session_factory(engine)
        done = threading.Event()
        seen: set[object] = set()
        owners: set[str] = set()

        def take_over(name: str) -> None:
            # What a sweeper does with a lapsed lease, as often as the lock allows.
            while not done.is_set():
                with transaction(factory, durable=False) as db:
                    db.execute(WORK)
                    lock.try_acquire(db, sid, lock.TURN, name, BUSY_LEASE)
                    row = db.execute(
                        select(SessionLock.owner, SessionLock.expires_at).where(
                            SessionLock.session_id == sid, SessionLock.kind == lock.TURN
                        )
                    ).one()
                    owners.add(row.owner)
                    seen.add(row.expires_at)
                if row.owner != "holder" or len(seen) >= RENEWALS_TO_SEE:
                    done.set()

        try:
            with transaction(factory) as db:
                bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
                sid = get_or_create_session(db, Conversation("default", bot.id, "webchat", "c")).id
            with lock.held(factory, sid, lock.TURN, "holder", BUSY_LEASE) as keeper:
                assert keeper is not None
                writers = [threading.Thread(target=take_over, args=(f"w{i}",)) for i in range(4)]
                for writer in writers:
                    writer.start()
                assert done.wait(timeout=120), "the writers saw neither renewals nor a takeover"
                for writer in writers:
                    writer.join()
                assert owners == {"holder"}, "a writer took the lease over from a live holder"
                assert not keeper.lost
        finally:
            done.set()
            engine.dispose()

    def test_a_renewal_goes_before_the_writers_already_waiting(self, sqlite_url: str) -> None:
        engine = create_db_engine(sqlite_url)
        factory = make_session_factory(engine)
        gate = _gate_for(make_url(sqlite_url).database or "")
        assert gate is not None
        holding, release = threading.Event(), threading.Event()
        order: list[str] = []

        def hold() -> None:
            with transaction(factory) as db:
                db.execute(text("SELECT 1"))
                holding.set()
                release.wait(timeout=60)

        def write(name: str) -> None:
            with transaction(factory) as db:
                db.execute(text("SELECT 1"))
                order.append(name)

        def renewal() -> None:
            with write_first():
                write("renewal")

        threads = [threading.Thread(target=hold)]
        try:
            threads[0].start()
            assert holding.wait(timeout=60)
            threads.append(threading.Thread(target=write, args=("writer",)))
            threads[-1].start()
            wait_until(lambda: gate.waiting == 1, what="the writer queued")
            threads.append(threading.Thread(target=renewal))
            threads[-1].start()
            wait_until(lambda: gate.renewals_waiting == 1, what="the renewal queued")
        finally:
            release.set()
            for thread in threads:
                thread.join(timeout=60)
            engine.dispose()
        assert order == ["renewal", "writer"]

    def test_a_writer_asking_while_the_gate_is_free_does_not_wait_for_a_woken_one(
        self, sqlite_url: str
    ) -> None:
        """No hand-over to a sleeping waiter: that made every write of a burst wait for a
        thread to be scheduled (a quarter fewer turns a second on the embedded database)."""
        gate = _gate_for(make_url(sqlite_url).database or "")
        assert gate is not None
        assert gate.acquire(5)

        def write() -> None:
            if gate.acquire(60):
                gate.release()

        waiter = threading.Thread(target=write)
        waiter.start()
        try:
            wait_until(lambda: gate.waiting == 1, what="a writer waiting")
            # Holding the gate's condition keeps the woken waiter from running meanwhile.
            with gate._changed:
                gate.release()
                assert gate.acquire(0), "the free gate was kept for the waiter"
            gate.release()
        finally:
            waiter.join(timeout=60)
        assert not waiter.is_alive()
