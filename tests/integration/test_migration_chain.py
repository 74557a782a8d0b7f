"""Every migration goes down and up again on a database that holds a conversation.

On SQLite a batch migration rebuilds a table; with foreign keys enforced, dropping a table
that messages point at failed ("database table is locked"), so no downgrade of ``sessions``
worked once anything had been said.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.migrations import current_revision, head_revision
from agent_core.sessions.service import Conversation, IncomingMessage, record_incoming
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter
from alembic import command
from tests.integration.test_migration_session_model import _config

pytestmark = pytest.mark.integration


def _say(db_url: str, chat_id: str, text: str) -> None:
    engine = create_db_engine(db_url)
    try:
        with transaction(make_session_factory(engine)) as db:
            bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
            chat = Conversation("default", bot.id, "webchat", chat_id)
            record_incoming(
                db, IncomingMessage(chat, text, chat_id, "u1", "Ann"), TokenCounter("cl100k_base")
            )
    finally:
        engine.dispose()


def _count(db_url: str, table: str) -> int:
    engine = create_db_engine(db_url)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(sa.text(f"SELECT count(*) FROM {table}")) or 0)
    finally:
        engine.dispose()


def test_each_step_of_the_chain_goes_down_and_up_with_messages_stored(db_url: str) -> None:
    _say(db_url, "c1", "hello before any downgrade")
    script = ScriptDirectory.from_config(_config(db_url))
    steps = [rev for rev in script.walk_revisions() if rev.down_revision is not None]
    assert len(steps) > 10
    for step in steps:  # head first
        down = str(step.down_revision)
        command.downgrade(_config(db_url), down)
        assert current_revision(db_url) == down
        command.upgrade(_config(db_url), step.revision)
        assert current_revision(db_url) == step.revision
        command.downgrade(_config(db_url), down)
    command.upgrade(_config(db_url), "head")
    assert current_revision(db_url) == head_revision()
    assert _count(db_url, "messages") == 1
    _say(db_url, "c2", "hello after the round trip")
    assert _count(db_url, "messages") == 2
