"""Memory entries: durable facts the agent keeps across sessions (frozen into new prompts)."""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin


class MemoryEntry(TimestampMixin, Base):
    """One remembered fact, for a whole bot or about one user of it."""

    __tablename__ = "memory_entries"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    bot_id: Mapped[int | None] = mapped_column(
        ForeignKey("bots.id", ondelete="CASCADE"), nullable=True
    )
    subject: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """The user the fact is about; ``None`` for facts about the bot's community."""
    content: Mapped[str] = mapped_column(Text, nullable=False)
