"""full-text search indexes only what people and the bot said (user and assistant messages)

Revision ID: 0023_y_search_what_was_said
Revises: 0022_x_session_stop_seq
Create Date: 2026-12-03 21:00:00

``session_search`` and ``recall`` read user and assistant messages only, but the index of
0008_g_tools covered every message: each tool result paid for its words at insert, on the
turn's path (Postgres' ``to_tsvector`` takes about a millisecond for 8,000 characters; a
50,000-character result several), for an index nothing reads.

- Postgres: the same expression GIN index, partial: ``WHERE role IN ('user', 'assistant')``.
  A query uses it only when it says that predicate with literal values, as
  ``agent_core/sessions/archive_search.py`` does. Built ``CONCURRENTLY`` under another name,
  then swapped in, outside a transaction: a gateway still serving during the upgrade (the
  Helm chart's ``pre-upgrade`` job) keeps reading and writing ``messages`` meanwhile.
- SQLite: the FTS5 triggers fire for those roles only, and the index is refilled with just
  those rows (an external-content table must never be told to delete a row it does not
  hold). A later migration that rebuilds ``messages`` in batch mode drops these triggers:
  it must create them again (``test_session_search.py`` checks they exist at head).
"""

from collections.abc import Sequence

from alembic import op


revision: str = '0023_y_search_what_was_said'
down_revision: str | None = '0022_x_session_stop_seq'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SAID = "('user', 'assistant')"
TRIGGERS = ('messages_fts_ai', 'messages_fts_ad', 'messages_fts_au')
POSTGRES_INDEX = (
    "CREATE INDEX CONCURRENTLY {name} ON messages "
    "USING gin (to_tsvector('simple', coalesce(content, '')))"
)
BUILDING = 'ix_messages_content_fts_new'
SQLITE_SAID_TRIGGERS = (
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages "
    f"WHEN new.role IN {SAID} BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages "
    f"WHEN old.role IN {SAID} BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, role ON messages "
    f"WHEN old.role IN {SAID} OR new.role IN {SAID} BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    f"SELECT 'delete', old.id, old.content WHERE old.role IN {SAID}; "
    "INSERT INTO messages_fts(rowid, content) "
    f"SELECT new.id, new.content WHERE new.role IN {SAID}; END",
)
SQLITE_EVERY_TRIGGER = (
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
)


def _sqlite_triggers(statements: Sequence[str]) -> None:
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _sqlite_triggers(SQLITE_SAID_TRIGGERS)
        op.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
        op.execute(
            "INSERT INTO messages_fts(rowid, content) "
            f"SELECT id, content FROM messages WHERE role IN {SAID}"
        )
    else:
        _swap_postgres_index(f"{POSTGRES_INDEX} WHERE role IN {SAID}")


def _swap_postgres_index(create: str) -> None:
    """Build the index beside the old one, then drop that and take its name."""
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")  # an interrupted build's
        op.execute(create.format(name=BUILDING))
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_messages_content_fts")
        op.execute(f"ALTER INDEX {BUILDING} RENAME TO ix_messages_content_fts")


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _sqlite_triggers(SQLITE_EVERY_TRIGGER)
        op.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    else:
        _swap_postgres_index(POSTGRES_INDEX)
