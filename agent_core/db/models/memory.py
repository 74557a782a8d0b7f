"""Memory entries: durable facts the agent keeps across sessions (frozen into new prompts)."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin


class MemoryScope(StrEnum):
    """Whose a fact is, which decides the prompts it reaches."""

    USER = "user"
    """One person's, with one bot: only that person's private chats with it."""
    CHAT = "chat"
    """One chat's (a group with all its threads, or one private chat): only that chat."""
    BOT = "bot"
    """The bot's whole community (rows from before scopes existed): every chat of the bot."""


class MemoryEntry(TimestampMixin, Base):
    """One remembered fact, scoped to a person, a chat, or a whole bot."""

    __tablename__ = "memory_entries"
    __table_args__ = (
        Index("ix_memory_entries_scope", "tenant_id", "bot_id", "scope", "subject"),
        Index("ix_memory_entries_chat", "tenant_id", "bot_id", "scope", "chat_key"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    bot_id: Mapped[int | None] = mapped_column(
        ForeignKey("bots.id", ondelete="CASCADE"), nullable=True
    )
    scope: Mapped[str] = mapped_column(
        String(8), nullable=False, default=MemoryScope.BOT, server_default=MemoryScope.BOT
    )
    subject: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """The platform id of the person a ``user`` fact belongs to."""
    chat_key: Mapped[str | None] = mapped_column(String(512), nullable=True)
    """The chat a ``chat`` fact belongs to (tenant / bot / platform / chat id)."""
    author_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """Whose message led to the fact being written (``/forget`` in a group removes only
    one's own)."""
    content: Mapped[str] = mapped_column(Text, nullable=False)
