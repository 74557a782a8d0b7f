"""All SQL for memory entries."""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, delete, false, or_, select
from sqlalchemy.orm import Session

from agent_core.db.models import MemoryEntry, MemoryScope

MAX_SNAPSHOT_ENTRIES = 50


class MemoryRepository:
    """Reads and writes of a tenant's memory."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> MemoryRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def add(
        self,
        tenant_id: str,
        content: str,
        *,
        bot_id: int | None = None,
        scope: MemoryScope = MemoryScope.BOT,
        subject: str | None = None,
        chat_key: str | None = None,
        author_id: str | None = None,
    ) -> MemoryEntry:
        """Store a fact; it reaches prompts built after this (new sessions, compactions)."""
        entry = MemoryEntry(
            tenant_id=tenant_id,
            bot_id=bot_id,
            scope=scope,
            subject=subject,
            chat_key=chat_key,
            author_id=author_id,
            content=content,
        )
        self.session.add(entry)
        self.session.flush()
        return entry

    def entries(
        self,
        tenant_id: str,
        bot_id: int,
        *,
        user_id: str | None = None,
        chat_key: str | None = None,
        include_bot_wide: bool = False,
        limit: int | None = None,
    ) -> list[MemoryEntry]:
        """The facts of one person (``user_id``) and / or one chat (``chat_key``), oldest first.

        Args:
            tenant_id: the tenant.
            bot_id: the bot; facts stored without a bot belong to all its tenant's bots.
            user_id: include this person's ``user`` facts.
            chat_key: include this chat's ``chat`` facts.
            include_bot_wide: include the bot's community-wide facts.
            limit: only the newest this many.
        """
        scopes: list[ColumnElement[bool]] = []
        if user_id is not None:
            scopes.append(
                and_(MemoryEntry.scope == MemoryScope.USER, MemoryEntry.subject == user_id)
            )
        if chat_key is not None:
            scopes.append(
                and_(MemoryEntry.scope == MemoryScope.CHAT, MemoryEntry.chat_key == chat_key)
            )
        if include_bot_wide:
            scopes.append(MemoryEntry.scope == MemoryScope.BOT)
        query = (
            select(MemoryEntry)
            .where(
                MemoryEntry.tenant_id == tenant_id,
                or_(MemoryEntry.bot_id == bot_id, MemoryEntry.bot_id.is_(None)),
                or_(*scopes) if scopes else false(),
            )
            .order_by(MemoryEntry.id.desc())
        )
        if limit is not None:
            query = query.limit(limit)
        return list(reversed(list(self.session.scalars(query))))

    def delete(self, ids: list[int]) -> int:
        """Remove entries by id; returns how many went."""
        if not ids:
            return 0
        result = self.session.execute(delete(MemoryEntry).where(MemoryEntry.id.in_(ids)))
        return int(result.rowcount)  # type: ignore[attr-defined]
