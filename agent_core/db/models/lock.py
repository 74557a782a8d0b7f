"""Per-session leases: who runs the session's turns, who compacts it, and until when."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, UTCDateTime, utcnow


class SessionLock(Base):
    """A lease on one session for one purpose (``turn`` or ``compaction``)."""

    __tablename__ = "session_locks"

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False, default=utcnow)
