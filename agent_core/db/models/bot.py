"""Bots: one platform identity of a tenant (a Telegram bot, Discord app, Slack app, web chat)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin


class Bot(TimestampMixin, Base):
    """A bot on one platform. ``name`` is the bot id users configure (``default`` from env)."""

    __tablename__ = "bots"
    __table_args__ = (UniqueConstraint("tenant_id", "platform", "name"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    platform: Mapped[str] = mapped_column(String(32), nullable=False)
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    trigger_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """When the bot answers in groups: ``mention``, ``all`` or ``commands``; ``None``
    inherits the tenant's (``agent_core.tenancy.settings``)."""
    busy_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """What messages arriving during a running turn do: ``queue``, ``collect``,
    ``interrupt`` or ``steer`` (``agent_core.agent.busy``); ``None`` inherits the tenant's."""
    answer_bots: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    credentials: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Platform credentials, encrypted at rest (never logged)."""
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    """Per-bot options: allowlists, API base URL, persona override."""
