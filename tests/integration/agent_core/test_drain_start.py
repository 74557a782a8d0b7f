"""A drain starts on one query: the waiting messages and the busy settings that plan them."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from agent_core.busy import STOP_COMMAND
from agent_core.db.engine import transaction
from agent_core.db.models import Bot, Tenant
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import Conversation, IncomingMessage, record_incoming
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter

pytestmark = pytest.mark.integration

COUNTER = TokenCounter("cl100k_base")


def test_the_waiting_messages_come_in_order_with_the_bot_s_and_tenant_s_busy_settings(
    factory: sessionmaker[Session],
) -> None:
    with transaction(factory) as db:
        bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
        chat = Conversation("default", bot.id, "webchat", "c1")
        said = [
            record_incoming(db, IncomingMessage(chat, f"m{n}", str(n), "u1", "Ann"), COUNTER)
            for n in range(3)
        ]
        stop = record_incoming(
            db,
            IncomingMessage(
                chat, "/stop", "s", "u1", "Ann", is_command=True, meta={"command": STOP_COMMAND}
            ),
            COUNTER,
        )
        session_id = said[0].session_id
        tenant = db.get(Tenant, "default")
        assert tenant is not None
        tenant.settings = {**(tenant.settings or {}), "busy_mode": "collect"}

    with transaction(factory) as db:
        start = SessionRepository.from_session(db).drain_start(session_id, limit=10)
        assert start is not None
        assert [w.id for w in start.waiting] == [*(r.message_id for r in said), stop.message_id]
        assert [w.stop for w in start.waiting] == [False, False, False, True]
        assert start.own_busy_mode is None
        assert start.tenant_settings["busy_mode"] == "collect"
        limited = SessionRepository.from_session(db).drain_start(session_id, limit=2)
        assert limited is not None
        assert [w.id for w in limited.waiting] == [r.message_id for r in said[:2]]

    with transaction(factory) as db:
        row = db.get(Bot, bot.id)
        assert row is not None
        row.busy_mode = "interrupt"
        repo = SessionRepository.from_session(db)
        for waiting in (*said, stop):
            assert repo.close_turn(waiting.message_id)

    with transaction(factory) as db:
        start = SessionRepository.from_session(db).drain_start(session_id, limit=10)
        assert start is not None
        assert start.waiting == [], "nothing waits: the settings still come"
        assert start.own_busy_mode == "interrupt"
        assert SessionRepository.from_session(db).drain_start("no-such-session", limit=10) is None
