"""Item 21e: on SQLite, reads never take the write lock (WAL, deferred transactions)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select, text

from agent_core.db.engine import (
    create_db_engine,
    make_session_factory,
    read_transaction,
    transaction,
)
from agent_core.db.models import ChatSession

pytestmark = pytest.mark.integration


def test_a_read_completes_while_a_writer_holds_the_lock(sqlite_url):
    engine = create_db_engine(sqlite_url)
    factory = make_session_factory(engine)
    writing, read_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with transaction(factory) as db:
                db.execute(text("CREATE TABLE held (x INTEGER)"))
                writing.set()
                # Hold the write lock until the read is done (or give up after a bound).
                read_done.wait(timeout=20)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
            writing.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert writing.wait(timeout=60)
        with read_transaction(factory) as db:
            count = db.scalar(select(func.count(ChatSession.id)))
        # The read finished while the writer still held its transaction open.
        assert thread.is_alive()
        assert count == 0
    finally:
        read_done.set()
        thread.join(timeout=60)
        engine.dispose()
    assert not errors


def test_writes_still_take_the_lock_up_front(sqlite_url):
    engine = create_db_engine(sqlite_url)
    factory = make_session_factory(engine)
    try:
        with transaction(factory) as db:
            assert db.connection().connection.dbapi_connection.in_transaction  # type: ignore[union-attr]
        with read_transaction(factory) as db:
            assert db.scalar(select(func.count(ChatSession.id))) == 0
        with transaction(factory) as db:  # the read flag does not leak into later writes
            db.execute(text("CREATE TABLE later (x INTEGER)"))
    finally:
        engine.dispose()
