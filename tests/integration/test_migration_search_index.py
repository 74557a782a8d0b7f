"""0023_y_search_what_was_said: the full-text index holds user and assistant messages only.

Tool results paid for their words at insert, on the turn's path, for an index nothing
reads (``session_search`` and ``recall`` read what people and the bot said).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from agent_core.db.engine import create_db_engine
from alembic import command
from tests.integration.test_migration_chain import _say
from tests.integration.test_migration_session_model import _config

pytestmark = pytest.mark.integration

BEFORE = "0022_x_session_stop_seq"
TOOL_OUTPUT = "toolword appears only in the output of a tool"


@contextmanager
def _unit(db_url: str) -> Iterator[sa.Connection]:
    """One transaction on a short-lived engine (migrations run between them)."""
    engine = create_db_engine(db_url)
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


def _add_tool_message(db_url: str) -> int:
    """A tool result beside the conversation's first message (its session and bot)."""
    with _unit(db_url) as conn:
        return int(
            conn.execute(
                sa.text(
                    "INSERT INTO messages (session_id, bot_id, seq, anchor_seq, role, kind,"
                    " content, tool_call_id, turn_state, token_count, archived, deleted, meta)"
                    " SELECT session_id, bot_id, (SELECT max(m.seq) + 1 FROM messages m),"
                    " anchor_seq, 'tool', kind, :content, 'c1', 'none', 9, archived, deleted,"
                    " meta FROM messages"
                    " ORDER BY id LIMIT 1 RETURNING id"
                ),
                {"content": TOOL_OUTPUT},
            ).scalar_one()
        )


def _fts_rows(db_url: str, word: str) -> list[int]:
    """The messages SQLite's index finds ``word`` in; also checks the index is sound."""
    with _unit(db_url) as conn:
        conn.execute(sa.text("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')"))
        return list(
            conn.execute(
                sa.text("SELECT rowid FROM messages_fts WHERE messages_fts MATCH :word"),
                {"word": word},
            ).scalars()
        )


def test_sqlite_indexes_what_was_said_and_leaves_tool_output_out(sqlite_url: str) -> None:
    command.downgrade(_config(sqlite_url), BEFORE)
    _say(sqlite_url, "c1", "hello before the upgrade")
    tool_id = _add_tool_message(sqlite_url)
    assert _fts_rows(sqlite_url, "toolword") == [tool_id], "0008 indexed every message"

    command.upgrade(_config(sqlite_url), "head")
    assert _fts_rows(sqlite_url, "toolword") == [], "refilled with what was said only"
    assert len(_fts_rows(sqlite_url, "upgrade")) == 1
    _say(sqlite_url, "c2", "hello after the upgrade")
    _add_tool_message(sqlite_url)
    assert len(_fts_rows(sqlite_url, "upgrade")) == 2
    assert _fts_rows(sqlite_url, "toolword") == []

    with _unit(sqlite_url) as conn:  # a row the index never held is deleted cleanly
        conn.execute(sa.text("DELETE FROM messages WHERE role = 'tool'"))
        conn.execute(sa.text("UPDATE messages SET content = 'edited hello'"))
    assert _fts_rows(sqlite_url, "upgrade") == []
    assert len(_fts_rows(sqlite_url, "edited")) == 2

    command.downgrade(_config(sqlite_url), BEFORE)
    assert len(_fts_rows(sqlite_url, "edited")) == 2, "rebuilt over every message again"


def test_postgres_indexes_what_was_said_only(postgres_url: str) -> None:
    def definition() -> str:
        with _unit(postgres_url) as conn:
            return str(
                conn.execute(
                    sa.text(
                        "SELECT indexdef FROM pg_indexes"
                        " WHERE indexname = 'ix_messages_content_fts'"
                    )
                ).scalar_one()
            )

    assert "WHERE ((role)::text = ANY" in definition()
    assert "'user'" in definition()
    assert "'assistant'" in definition()
    command.downgrade(_config(postgres_url), BEFORE)
    assert "WHERE" not in definition()
    command.upgrade(_config(postgres_url), "head")
    assert "to_tsvector('simple'::regconfig, COALESCE(content, ''::text))" in definition()
