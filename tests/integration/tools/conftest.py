"""Fixtures of the tool tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.engine import create_db_engine, make_session_factory


@pytest.fixture
def factory(db_url: str) -> Iterator[sessionmaker[Session]]:
    """A session factory on a fresh database of each backend."""
    engine = create_db_engine(db_url)
    yield make_session_factory(engine)
    engine.dispose()
