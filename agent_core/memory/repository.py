"""All SQL for memory entries."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from agent_core.db.models import MemoryEntry

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
        self, tenant_id: str, content: str, *, bot_id: int | None = None, subject: str | None = None
    ) -> MemoryEntry:
        """Store a fact; it reaches prompts built after this (new sessions, compactions)."""
        entry = MemoryEntry(tenant_id=tenant_id, bot_id=bot_id, subject=subject, content=content)
        self.session.add(entry)
        self.session.flush()
        return entry

    def snapshot(self, tenant_id: str, bot_id: int) -> list[str]:
        """The newest facts for the bot (and tenant-wide ones), oldest first."""
        rows = self.session.scalars(
            select(MemoryEntry.content)
            .where(
                MemoryEntry.tenant_id == tenant_id,
                or_(MemoryEntry.bot_id == bot_id, MemoryEntry.bot_id.is_(None)),
            )
            .order_by(MemoryEntry.id.desc())
            .limit(MAX_SNAPSHOT_ENTRIES)
        )
        return list(reversed(list(rows)))
