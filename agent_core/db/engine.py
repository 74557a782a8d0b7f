"""Engines and sessions for Postgres (production) and SQLite (the embedded default)."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
POOL_SIZE = 10
POOL_RECYCLE_SECONDS = 1800


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Autocommit at the driver so SQLAlchemy's "begin" event decides how a transaction starts.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


_READING: ContextVar[bool] = ContextVar("hubbub_sqlite_reading", default=False)
"""Set by :func:`read_transaction`: the transaction being begun only reads."""
_FIRST: ContextVar[bool] = ContextVar("hubbub_sqlite_write_first", default=False)
"""Set by :func:`write_first`: the write being begun goes before the others waiting."""


class _WriteGate:
    """One writer at a time for one process's SQLite writes, lease renewals first.

    SQLite's own busy wait retries after sleeps growing to 100 ms, and a writer arriving
    between two of those tries takes the free lock first; under a steady stream of short
    transactions (twenty streamed replies) one waiter was passed over for more than a
    second, long enough for a turn lease being renewed to lapse. Here a waiting renewal
    holds every other writer back until it has written.

    Otherwise whoever asks while the gate is free takes it, running threads before woken
    ones: handing the gate to the longest waiter instead (first come, first served) made
    every write wait for a sleeping thread to be scheduled, and a burst of turns on the
    embedded database answered a quarter fewer turns a second.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._first = 0
        """Renewals waiting for the gate (``write_first``)."""
        self.waiting = 0
        """Other writers waiting for it."""

    def acquire(self, timeout: float, *, first: bool = False) -> bool:
        """Wait until this caller may write; ``False`` when ``timeout`` seconds pass first.

        Args:
            timeout: seconds to wait at most.
            first: go before every waiter not marked so.
        """
        with self._changed:
            if first:
                self._first += 1
                try:
                    ready = self._changed.wait_for(lambda: not self._held, timeout)
                finally:
                    self._first -= 1
            else:
                self.waiting += 1
                try:
                    ready = self._changed.wait_for(
                        lambda: not self._held and not self._first, timeout
                    )
                finally:
                    self.waiting -= 1
            if ready:
                self._held = True
            elif first and not self._first and not self._held:
                self._changed.notify_all()  # a renewal that gave up holds no one back
            return ready

    @property
    def renewals_waiting(self) -> int:
        """Renewals waiting for the gate now."""
        return self._first

    def release(self) -> None:
        """Let the next writer in: a waiting renewal if there is one, else any writer."""
        with self._changed:
            self._held = False
            if self._first:
                self._changed.notify_all()  # the renewal among them, whichever is first
            else:
                self._changed.notify()


_GATES: dict[str, _WriteGate] = {}
_GATES_LOCK = threading.Lock()
# A forked child (Celery's prefork pool) has none of its parent's writers in flight.
os.register_at_fork(after_in_child=_GATES.clear)


def _gate_for(database: str) -> _WriteGate | None:
    """The process's gate for a database file (every engine on the file shares it)."""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    key = os.path.realpath(database)
    with _GATES_LOCK:
        return _GATES.setdefault(key, _WriteGate())


class _GatedConnection(sqlite3.Connection):
    """A SQLite connection that holds its file's write gate from ``BEGIN IMMEDIATE`` to its end."""

    def __init__(self, database: str | bytes | os.PathLike[str], *args: Any, **kwargs: Any):
        super().__init__(database, *args, **kwargs)
        self._gate = _gate_for(os.fsdecode(database))
        self._holding = False

    def wait_to_write(self) -> None:
        """Wait until the writers that came first are done; the caller then begins.

        The gate only orders writers: if it stays closed for the busy timeout (a writer
        that never ended its transaction), the caller goes on to SQLite's own lock, which
        then decides as it would without the gate.
        """
        if self._gate is None or self._holding:
            return
        if self._gate.acquire(SQLITE_BUSY_TIMEOUT_MS / 1000, first=_FIRST.get()):
            self._holding = True
        else:
            log.warning("SQLite write gate closed past the busy timeout; waiting on SQLite")

    def done_writing(self) -> None:
        """Let the next writer in (the transaction ended, or never began)."""
        if self._holding and self._gate is not None:
            self._holding = False
            self._gate.release()

    def commit(self) -> None:
        """Commit, then let the next writer in."""
        try:
            super().commit()
        finally:
            self.done_writing()

    def rollback(self) -> None:
        """Roll back, then let the next writer in."""
        try:
            super().rollback()
        finally:
            self.done_writing()

    def close(self) -> None:
        """Close (SQLite rolls back what is open), then let the next writer in."""
        try:
            super().close()
        finally:
            self.done_writing()


def _sqlite_begin(connection: Any) -> None:
    # A deferred transaction that later writes can fail with "database is locked" instead of
    # waiting; taking the write lock up front makes concurrent writers queue (in this process,
    # in arrival order at the write gate; other processes on busy_timeout).
    # A read takes no lock at all: under WAL it reads a snapshot while a writer writes, so
    # a long archive search never holds up intake or replies.
    if _READING.get():
        connection.exec_driver_sql("BEGIN DEFERRED")
        return
    dbapi_connection = connection.connection.dbapi_connection
    if not isinstance(dbapi_connection, _GatedConnection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        return
    dbapi_connection.wait_to_write()
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        dbapi_connection.done_writing()
        raise


def create_db_engine(url: str, *, echo: bool = False, connect_timeout: int | None = None) -> Engine:
    """An engine configured for concurrent workers on either backend.

    SQLite gets WAL, a busy timeout and immediate transactions (deferred ones for
    :func:`read_transaction`), whose writers take turns in arrival order within the process;
    its parent folder is created if missing. Postgres gets a
    pool; ``connect_timeout`` (seconds) bounds each new connection, for callers that must
    answer quickly (``hubbub doctor``) rather than wait for the operating system.

    Raises:
        sqlalchemy.exc.ArgumentError: ``url`` is not a URL SQLAlchemy can parse.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            echo=echo,
            connect_args={
                "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                "check_same_thread": False,
                "factory": _GatedConnection,
            },
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # No pre-ping: it costs a round trip per checkout on the hot path. After a database
    # restart the first statement on a stale connection fails, SQLAlchemy drops the whole
    # pool, and callers retry (the intake retries once; turns are re-run by the sweeper).
    # Commits are not waited to disk unless a transaction asks (see ``transaction``): set
    # at connection start, so the common case costs no extra round trip.
    return create_engine(
        url,
        echo=echo,
        pool_size=POOL_SIZE,
        max_overflow=POOL_SIZE,
        pool_recycle=POOL_RECYCLE_SECONDS,
        connect_args={"options": "-c synchronous_commit=off"}
        | ({"connect_timeout": connect_timeout} if connect_timeout else {}),
    )


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session], *, durable: bool = True) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any exception.

    Args:
        factory: the session factory.
        durable: ``True`` (the default) makes Postgres acknowledge the commit only once
            its WAL is on disk. ``False`` skips that wait (``synchronous_commit = off``,
            the connections' default): use it only where losing the transaction in a
            database crash is harmless or repaired — leases, which expire; a reply whose
            turn simply runs again; bookkeeping that a later durable commit (which flushes
            all earlier WAL) makes permanent anyway. It saves an fsync (several
            milliseconds) per commit. SQLite (WAL, ``synchronous=NORMAL``) ignores it.
    """
    with factory() as session, session.begin():
        if durable and session.get_bind().dialect.name == "postgresql":
            session.execute(_DURABLE_COMMIT)
        yield session


@contextmanager
def read_transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work that only reads: on SQLite it never takes the write lock.

    Writes inside it are a bug: SQLite would fail them with "database is locked" rather
    than wait. On Postgres it is an ordinary transaction (reads never block writers there).
    """
    with factory() as session, session.begin():
        token = _READING.set(True)
        try:
            session.connection()  # begins the transaction while the flag is set
        finally:
            _READING.reset(token)
        yield session


@contextmanager
def write_first() -> Iterator[None]:
    """Write transactions begun inside go before this process's other waiting writers.

    For the few tiny writes that must land within a deadline (a lease renewal, which
    would otherwise queue behind every turn's writes); on Postgres it changes nothing.
    """
    token = _FIRST.set(True)
    try:
        yield
    finally:
        _FIRST.reset(token)


_DURABLE_COMMIT = text("SET LOCAL synchronous_commit TO ON")
