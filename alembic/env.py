"""Alembic environment: runs Hubbub's migrations on Postgres or SQLite.

The URL comes from ``config.attributes["url"]`` (set by ``hubbub migrate``), else ``-x url=``,
else the settings object.
"""

from __future__ import annotations

from sqlalchemy import Connection

import agent_core.db.models  # noqa: F401  (registers every table)
from agent_core.config import load_settings
from agent_core.db.base import Base
from agent_core.db.engine import create_db_engine
from alembic import context

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    return str(url) if url else load_settings().resolved_database_url


def _run(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Hubbub's connections skip the WAL flush by default; schema changes wait for it.
        connection.exec_driver_sql("SET synchronous_commit TO ON")
        connection.commit()
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against a live database (the only mode Hubbub uses)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_db_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


run_migrations_online()
