"""API keys for the admin API: stored hashed, shown once, scoped to a tenant or to all."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin, UTCDateTime


class ApiKey(TimestampMixin, Base):
    """One admin API key. The secret itself is never stored, only its SHA-256."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    prefix: Mapped[str] = mapped_column(String(16), nullable=False, unique=True)
    """The visible start of the key (``hbk_`` and 8 characters): how people name it."""
    key_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    """Hex SHA-256 of the whole key (32 random bytes, so a fast hash is enough)."""
    tenant_id: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=True, index=True
    )
    """The tenant it is limited to; ``None`` for an operator key (every tenant)."""
    scope: Mapped[str] = mapped_column(String(8), nullable=False)
    """``admin`` (read and write) or ``read``."""
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
