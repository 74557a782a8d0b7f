"""The audit log: every change made through the admin API or the keys CLI."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, UTCDateTime, utcnow


class AuditEvent(Base):
    """Who changed what, when, with the values before and after (secrets removed)."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_tenant_at", "tenant_id", "at"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=True
    )
    """The tenant whose data changed; ``None`` for operator-wide changes."""
    actor: Mapped[str] = mapped_column(String(32), nullable=False)
    """The prefix of the key that made the change, or ``cli``."""
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    target: Mapped[str] = mapped_column(String(256), nullable=False)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, nullable=False)
