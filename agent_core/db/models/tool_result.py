"""Stored tool results: outputs too large for the context, read back page by page."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, TimestampMixin


class StoredToolResult(TimestampMixin, Base):
    """The full output of one tool call whose transcript message holds only a preview.

    Keyed by an unguessable ref and always read together with its session and tenant, so
    a ref seen in another conversation reads nothing.
    """

    __tablename__ = "tool_results"

    ref: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    tool_call_id: Mapped[str] = mapped_column(String(128), nullable=False)
    tool_name: Mapped[str] = mapped_column(String(128), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    chars: Mapped[int] = mapped_column(Integer, nullable=False)
