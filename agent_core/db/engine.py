"""Engines and sessions for Postgres (production) and SQLite (the embedded default)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

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


def _sqlite_begin(connection: Any) -> None:
    # A deferred transaction that later writes can fail with "database is locked" instead of
    # waiting; taking the write lock up front makes concurrent writers queue on busy_timeout.
    # A read takes no lock at all: under WAL it reads a snapshot while a writer writes, so
    # a long archive search never holds up intake or replies.
    connection.exec_driver_sql("BEGIN DEFERRED" if _READING.get() else "BEGIN IMMEDIATE")


def create_db_engine(url: str, *, echo: bool = False, connect_timeout: int | None = None) -> Engine:
    """An engine configured for concurrent workers on either backend.

    SQLite gets WAL, a busy timeout and immediate transactions (deferred ones for
    :func:`read_transaction`); its parent folder is created if missing. Postgres gets a
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
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
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


_DURABLE_COMMIT = text("SET LOCAL synchronous_commit TO ON")
