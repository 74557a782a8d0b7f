"""Sessions: one conversation (a DM, a group channel or a thread) and its frozen prompt."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, TimestampMixin, UTCDateTime


class ChatSession(TimestampMixin, Base):
    """A conversation's state.

    The session key (tenant / bot / chat / thread) names the conversation; ``/new`` ends
    the current session and starts another with the same key, so at most one session per
    key is current.
    """

    __tablename__ = "sessions"
    __table_args__ = (
        Index(
            "uq_sessions_current_key",
            "key",
            unique=True,
            postgresql_where=text("is_current"),
            sqlite_where=text("is_current"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    key: Mapped[str] = mapped_column(String(512), nullable=False, index=True)
    platform: Mapped[str] = mapped_column(String(32), nullable=False)
    chat_id: Mapped[str] = mapped_column(String(128), nullable=False)
    thread_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    chat_type: Mapped[str] = mapped_column(String(16), nullable=False, default="private")
    """``private`` or ``group``: groups record unaddressed messages as context."""
    is_current: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    next_seq: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Last sequence number handed out; bumping it under a row lock orders arrivals."""
    stop_seq: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default=text("0")
    )
    """The number of the session's latest ``/stop`` (0: none yet), set as it is stored: a
    turn with no ``/stop`` behind it reads no waiting messages to find one."""
    last_message_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), nullable=True, index=True
    )
    """When the session last received or sent a message."""
    last_compacted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the transcript of its last compaction was read, or when the session was found
    not worth compacting while quiet: later messages make a quiet session worth a look."""

    system_prompt: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The frozen system prompt, restored byte for byte by every turn."""
    prompt_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """Hash of what the prompt was built from (model, toolset, persona)."""
    prompt_built_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The model ``/model`` chose for this session; ``None``: the tenant's default."""
    has_media: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=text("false")
    )
    """Whether a message of the session carried images: without, a turn reads no media."""

    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The current compaction summary of archived turns, if any."""
    summary_anchor_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    summary_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Where the summary sits in the transcript: before the first message at or after this
    (anchor_seq, seq) position, which is that of the earliest archived message."""
    summary_version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    compaction_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    ineffective_compactions: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    compaction_cooldown_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """The provider's ``prompt_tokens`` for the last call; 0 when unknown."""
    active_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Running total of the exact token counts of the session's active chat messages."""
    active_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Running count of the session's active chat messages."""
    context_state: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    """The rest of the context engine's state between turns (see ``agent_core.compaction``)."""
    tokens_spent: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Prompt plus completion tokens billed to this session."""
