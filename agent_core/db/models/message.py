"""Messages: a session's transcript in arrival order, including archived (compacted) turns."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin, UTCDateTime


class TurnState(StrEnum):
    """Whether a message asks for a turn, and how far that turn got."""

    NONE = "none"
    """Context only (a group message that did not address the bot, or a reply)."""
    PENDING = "pending"
    DONE = "done"


class MessageKind(StrEnum):
    """What a message is, which decides whether the model sees it."""

    CHAT = "chat"
    """Conversation the model sees."""
    COMMAND = "command"
    """A chat command (``/new``) and its answer: shown to people, never to the model."""
    NOTICE = "notice"
    """A gateway notice (an error reply, a warning): shown to people, never to the model."""
    STEERED = "steered"
    """A message a running tool loop took in through the steer channel: shown to people;
    the model read it inside that turn's tool result, so it is not sent again."""


class Message(TimestampMixin, Base):
    """One chat message (OpenAI roles) with its platform identity and cached token count."""

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        UniqueConstraint("bot_id", "platform_message_id"),
        Index("ix_messages_session_turn", "session_id", "turn_state", "seq"),
        Index("ix_messages_session_active", "session_id", "archived", "anchor_seq"),
        Index("ix_messages_turn_state", "turn_state"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False
    )
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    """Arrival order within the session."""
    anchor_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    """Transcript position: a reply sits right after the message it answers."""
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False, default=MessageKind.CHAT)
    speaker_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    speaker_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    content: Mapped[str | None] = mapped_column(Text, nullable=True)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    platform_message_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """The platform's id for this message; unique per bot, which makes retries no-ops."""
    reply_to_platform_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    turn_state: Mapped[str] = mapped_column(String(16), nullable=False, default=TurnState.NONE)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    token_encoding: Mapped[str | None] = mapped_column(String(32), nullable=True)
    archived: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    """Compacted away: kept, searchable and restorable, but not sent to the model."""
    compaction_id: Mapped[int | None] = mapped_column(
        ForeignKey("compactions.id", ondelete="SET NULL"), nullable=True, index=True
    )
    """The compaction that archived (or pruned) this message."""
    edited_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
