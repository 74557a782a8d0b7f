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
    sqlite = connection.dialect.name == "sqlite"
    if connection.dialect.name == "postgresql":
        # Hubbub's connections skip the WAL flush by default; schema changes wait for it.
        connection.exec_driver_sql("SET synchronous_commit TO ON")
        connection.commit()
    if sqlite:
        _sqlite_foreign_keys(connection, on=False)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=sqlite,
        compare_type=True,
    )
    try:
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                _check_foreign_keys(connection)
    finally:
        if sqlite:
            _sqlite_foreign_keys(connection, on=True)


def _sqlite_foreign_keys(connection: Connection, *, on: bool) -> None:
    """Switch SQLite's foreign-key enforcement for a batch migration, as SQLite prescribes.

    A batch migration rebuilds a table (copy, drop, rename); with enforcement on, dropping a
    table other rows point at fails ("database table is locked" once messages exist). The
    pragma is a no-op inside a transaction, so it goes to the driver's connection between
    transactions.
    """
    if connection.in_transaction():
        connection.commit()
    raw = connection.connection.dbapi_connection
    assert raw is not None
    raw.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


def _check_foreign_keys(connection: Connection) -> None:
    """Refuse to commit a migration that left a row pointing at nothing."""
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    if broken:
        tables = sorted({str(row[0]) for row in broken})
        raise RuntimeError(f"the migration broke foreign keys in: {', '.join(tables)}")


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
