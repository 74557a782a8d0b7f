"""Rows and contexts for the tool tests: bots, chats, messages, a ToolContext."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from agent_core.config import ToolSettings
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, Tenant
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import (
    GROUP,
    PRIVATE,
    Conversation,
    IncomingMessage,
    record_incoming,
    record_reply,
    start_new_session,
)
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter
from agent_core.tools.base import ToolContext
from agent_core.tools.registry import ToolRegistry

COUNTER = TokenCounter("cl100k_base")
_ids = itertools.count(1)


@dataclass
class Chat:
    """One conversation of a bot, with helpers to fill it."""

    factory: sessionmaker[Session]
    conversation: Conversation

    def say(
        self, text: str, user: str = "ann", name: str | None = None, *, answer: str = ""
    ) -> int:
        """Record a user message (and an optional bot reply); returns the message id."""
        with transaction(self.factory) as db:
            result = record_incoming(
                db,
                IncomingMessage(
                    self.conversation, text, f"p{next(_ids)}", user, name or user.title()
                ),
                COUNTER,
            )
            if answer:
                chat_session = SessionRepository.from_session(db).get(result.session_id)
                trigger = db.get(Message, result.message_id)
                assert chat_session is not None
                assert trigger is not None
                record_reply(db, chat_session, trigger, answer, counter=COUNTER)
            return result.message_id

    def archive_all(self) -> None:
        """Mark every message of the current session archived (as a compaction does)."""
        with transaction(self.factory) as db:
            db.execute(
                update(Message).where(Message.session_id == self.session().id).values(archived=True)
            )

    def new_session(self) -> None:
        with transaction(self.factory) as db:
            start_new_session(db, self.conversation)

    def session(self) -> ChatSession:
        with transaction(self.factory) as db:
            found = SessionRepository.from_session(db).get_current_by_key(self.conversation.key)
            assert found is not None
            return found

    def ctx(self, user: str | None = "ann", *, context_length: int = 128_000) -> ToolContext:
        s = self.session()
        return ToolContext(
            factory=self.factory,
            tenant_id=s.tenant_id,
            bot_id=s.bot_id,
            session_id=s.id,
            conversation_key=s.key,
            platform=s.platform,
            chat_id=s.chat_id,
            chat_type=s.chat_type,
            user_id=user,
            timezone="UTC",
            context_length=context_length,
        )


def make_chat(
    factory: sessionmaker[Session],
    chat_id: str,
    *,
    group: bool = False,
    tenant: str = "default",
    platform: str = "webchat",
    bot: str = "default",
) -> Chat:
    with transaction(factory) as db:
        if db.get(Tenant, tenant) is None:
            db.add(Tenant(id=tenant, name=tenant))
            db.flush()
        row = TenancyRepository(db).ensure_bot(tenant, platform, bot, settings={})
        bot_id = row.id
    return Chat(
        factory,
        Conversation(tenant, bot_id, platform, chat_id, chat_type=GROUP if group else PRIVATE),
    )


LIMITS = ToolSettings(memory_max_entries=3, memory_max_entry_chars=60)


def tools(context_length: int = 128_000, chat_type: str = "private") -> ToolRegistry:
    return ToolRegistry.for_turn(
        settings=LIMITS,
        allowed=None,
        mcp=None,
        chat_type=chat_type,
        context_length=context_length,
    )


def call(name: str, /, **arguments: object) -> dict[str, object]:
    """An OpenAI-format tool call."""
    return {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
