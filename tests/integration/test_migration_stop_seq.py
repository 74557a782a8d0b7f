"""Migration 0022 adds ``sessions.stop_seq``: a ``/stop`` waiting at upgrade time is found."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agent_core.busy import STOP_COMMAND
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.migrations import current_revision
from agent_core.sessions.service import Conversation, IncomingMessage, record_incoming
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter
from alembic import command
from tests.integration.test_migration_session_model import _config

pytestmark = pytest.mark.integration


def test_a_stop_waiting_at_upgrade_time_is_numbered(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        factory = make_session_factory(engine)
        with transaction(factory) as db:
            bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
            chat = Conversation("default", bot.id, "webchat", "c1")
            counter = TokenCounter("cl100k_base")
            record_incoming(db, IncomingMessage(chat, "hi", "1", "u1", "Ann"), counter)
            stop = record_incoming(
                db,
                IncomingMessage(
                    chat,
                    "/stop",
                    "2",
                    "u1",
                    "Ann",
                    is_command=True,
                    meta={"command": STOP_COMMAND},
                ),
                counter,
            )
            quiet = Conversation("default", bot.id, "webchat", "c2")
            record_incoming(db, IncomingMessage(quiet, "hello", "3", "u2", "Bo"), counter)
        with engine.connect() as connection:
            stop_seq = connection.scalar(
                sa.text("SELECT seq FROM messages WHERE id = :id"), {"id": stop.message_id}
            )
    finally:
        engine.dispose()

    command.downgrade(_config(db_url), "0021_w_session_media")
    command.upgrade(_config(db_url), "0022_x_session_stop_seq")
    assert current_revision(db_url) == "0022_x_session_stop_seq"

    engine = create_db_engine(db_url)
    try:
        with engine.connect() as connection:
            numbered: dict[str, int] = dict(
                connection.execute(
                    sa.text("SELECT s.chat_id, s.stop_seq FROM sessions s ORDER BY s.chat_id")
                ).all()
            )
    finally:
        engine.dispose()
    assert numbered == {"c1": stop_seq, "c2": 0}
    command.upgrade(_config(db_url), "head")
