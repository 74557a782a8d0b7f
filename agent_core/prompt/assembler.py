"""Assemble the inputs of a session's system prompt from the settings, tenant and memory."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from agent_core.config import Settings
from agent_core.db.models import ChatSession, Tenant
from agent_core.llm.model import ChatModel
from agent_core.memory.service import MemoryPlace, chat_scope_key
from agent_core.memory.service import snapshot as memory_snapshot
from agent_core.prompt.builder import PromptInputs
from agent_core.prompt.service import rebuild
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.transcript import GROUP
from agent_core.tenancy.settings import TenantDefaults


class PromptAssembler:
    """Knows where each prompt layer comes from; one per process (context files cached)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._context_files: tuple[tuple[str, str], ...] | None = None

    def inputs(
        self,
        chat_session: ChatSession,
        model: ChatModel,
        persona: str | None,
        tenant_instructions: str | None = None,
    ) -> PromptInputs:
        """The prompt inputs, memory excluded (it is read only when a prompt is built).

        The tenant's instructions follow the operator's; both are in the fingerprint, so a
        change rebuilds each session's frozen prompt once.
        """
        parts = [t.strip() for t in (self._settings.instructions, tenant_instructions) if t]
        return PromptInputs(
            persona=persona or self._settings.persona,
            model=model.name,
            platform=chat_session.platform,
            chat_type=chat_session.chat_type,
            session_id=chat_session.id,
            context_length=model.context_length,
            instructions="\n\n".join(p for p in parts if p) or None,
            context_files=self._load_context_files(),
            timezone=self._settings.timezone,
        )

    def memory(self, db: Session, chat_session: ChatSession) -> list[str]:
        """The memory snapshot a newly built prompt freezes.

        A person's own facts reach only their private chat, never a group.
        """
        return memory_snapshot(db, memory_place(db, chat_session))

    def today(self) -> date:
        """The prompt's date, in the configured time zone."""
        return datetime.now(ZoneInfo(self._settings.timezone)).date()

    def rebuild(self, db: Session, chat_session: ChatSession, model: ChatModel) -> str:
        """Build the session's prompt anew with fresh memory (after a compaction)."""
        tenant = db.get(Tenant, chat_session.tenant_id)
        inputs = self.inputs(
            chat_session,
            model,
            tenant.persona if tenant else None,
            TenantDefaults.from_json(tenant.settings if tenant else None).instructions,
        )
        with_memory = replace(inputs, memory=tuple(self.memory(db, chat_session)))
        return rebuild(db, chat_session, with_memory, self.today())

    def _load_context_files(self) -> tuple[tuple[str, str], ...]:
        if self._context_files is None:
            self._context_files = tuple(
                (Path(path).name, Path(path).read_text(encoding="utf-8", errors="replace"))
                for path in self._settings.context_files
            )
        return self._context_files


def memory_place(db: Session, chat_session: ChatSession, user_id: str | None = None) -> MemoryPlace:
    """The memory scope of a session: its chat and its person.

    The person is ``user_id`` (the sender being answered) or, in a private chat, its own.
    """
    if user_id is None and chat_session.chat_type != GROUP:
        user_id = SessionRepository.from_session(db).private_chat_user(chat_session.id)
    return MemoryPlace(
        tenant_id=chat_session.tenant_id,
        bot_id=chat_session.bot_id,
        chat_key=chat_scope_key(
            chat_session.tenant_id, chat_session.bot_id, chat_session.platform, chat_session.chat_id
        ),
        chat_type=chat_session.chat_type,
        user_id=user_id,
    )
