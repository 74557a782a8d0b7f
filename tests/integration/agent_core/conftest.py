"""A unit-of-work factory on a fresh database, for every library-level test here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.engine import create_db_engine, make_session_factory


@pytest.fixture
def factory(db_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on a fresh migrated database (the test runs on SQLite and Postgres)."""
    engine = create_db_engine(db_url)
    yield make_session_factory(engine)
    engine.dispose()
