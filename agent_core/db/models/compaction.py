"""Compactions: one row per attempt that changed a session's transcript, kept for audit and undo."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin


class Compaction(TimestampMixin, Base):
    """A compaction of a session: what triggered it, what it cost, the summary it wrote."""

    __tablename__ = "compactions"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    trigger: Mapped[str] = mapped_column(String(16), nullable=False)
    """``hygiene``, ``preflight``, ``overflow``, ``manual`` or ``background``."""
    strategy: Mapped[str] = mapped_column(String(24), nullable=False)
    """``summary``, ``chunked_summary`` or ``fallback`` (the deterministic digest)."""
    fallback_used: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    summary_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    model_fallback_used: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    tokens_before: Mapped[int] = mapped_column(Integer, nullable=False)
    tokens_after: Mapped[int] = mapped_column(Integer, nullable=False)
    archived_count: Mapped[int] = mapped_column(Integer, nullable=False)
    rewritten_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    summary: Mapped[str] = mapped_column(Text, nullable=False)
    """The summary body this compaction wrote."""
    summary_version: Mapped[int] = mapped_column(Integer, nullable=False)
    previous_summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The summary it replaced, so the compaction can be undone."""
    focus_topic: Mapped[str | None] = mapped_column(Text, nullable=True)
    summary_calls: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    max_summary_request_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    cpu_ms: Mapped[float | None] = mapped_column(nullable=True)
    """Compressor CPU time outside the summary model calls."""
    wall_ms: Mapped[float | None] = mapped_column(nullable=True)
    identifiers_carried: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    identifiers_dropped: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    restored: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    """Undone: its messages are active again and the previous summary is back."""
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
