"""The usage ledger and budgets: one row per model call, limits per tenant, user or chat."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin, UTCDateTime, utcnow


class UsageRecord(Base):
    """What one model call (main or summary) used and cost.

    ``call_key`` names the call within its turn or compaction, so a turn that runs again
    after a crash writes the same keys and charges nothing twice.
    """

    __tablename__ = "usage_records"
    __table_args__ = (
        Index("ix_usage_records_tenant_at", "tenant_id", "at"),
        Index("ix_usage_records_tenant_user_at", "tenant_id", "user_id", "at"),
        Index("ix_usage_records_tenant_chat_at", "tenant_id", "chat_key", "at"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    call_key: Mapped[str] = mapped_column(String(200), nullable=False, unique=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    bot_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """No foreign key: usage outlives a deleted bot or session."""
    session_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    chat_key: Mapped[str] = mapped_column(String(512), nullable=False)
    """The chat the call served (a group with all its threads), as budgets name it."""
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """The person being answered; ``None`` for compactions between turns."""
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    purpose: Mapped[str] = mapped_column(String(16), nullable=False)
    """``main`` (a turn's call) or ``summary`` (a compaction's)."""
    prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    cost_known: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    """``False``: no price for the model (litellm's map nor ``HUBBUB_MODEL_COSTS``); cost 0."""
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, nullable=False)


class Budget(TimestampMixin, Base):
    """A limit per period on a tenant's usage, for the tenant, for each user or each chat."""

    __tablename__ = "budgets"
    __table_args__ = (UniqueConstraint("tenant_id", "scope", "period", "unit"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    scope: Mapped[str] = mapped_column(String(8), nullable=False)
    """``tenant`` (all of it together), ``user`` (each person) or ``chat`` (each chat)."""
    period: Mapped[str] = mapped_column(String(8), nullable=False)
    """``day`` or ``month``, in ``HUBBUB_TIMEZONE``."""
    unit: Mapped[str] = mapped_column(String(8), nullable=False)
    """``tokens`` (prompt plus completion) or ``usd``."""
    amount: Mapped[float] = mapped_column(Float, nullable=False)


class BudgetAlert(Base):
    """A warning given (80 % or 95 %) for one budget, subject and period: given once."""

    __tablename__ = "budget_alerts"
    __table_args__ = (UniqueConstraint("budget_id", "subject", "period_label", "level"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    budget_id: Mapped[int] = mapped_column(
        ForeignKey("budgets.id", ondelete="CASCADE"), nullable=False
    )
    subject: Mapped[str] = mapped_column(String(512), nullable=False)
    """The user id or chat key the budget was counted for (empty for the tenant)."""
    period_label: Mapped[str] = mapped_column(String(16), nullable=False)
    """``2026-12-02`` or ``2026-12``."""
    level: Mapped[int] = mapped_column(Integer, nullable=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, nullable=False)


class BudgetLock(Base):
    """One row per tenant, locked while a call's estimate is checked and reserved.

    Every reservation for a tenant updates its row first, so concurrent checks of the same
    tenant's budgets queue on the row lock (Postgres) or the write lock (SQLite) and each
    sees the reservations committed before it.
    """

    __tablename__ = "budget_locks"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    touched_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, nullable=False)


class BudgetReservation(Base):
    """The estimate of a model call in flight, counted by budgets until it is charged.

    Settled (deleted) in the transaction that writes the call's usage row, released when
    the call fails, and ignored past ``expires_at`` when the worker holding it died.
    """

    __tablename__ = "budget_reservations"
    __table_args__ = (Index("ix_budget_reservations_tenant_expires", "tenant_id", "expires_at"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    holder: Mapped[str] = mapped_column(String(200), nullable=False, unique=True)
    """The turn or compaction holding it (``turn:<message id>``): a rerun replaces its own."""
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    chat_key: Mapped[str] = mapped_column(String(512), nullable=False)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    cost_usd: Mapped[float] = mapped_column(Float, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
