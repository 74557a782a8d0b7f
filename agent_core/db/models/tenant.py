"""Tenants: the unit of isolation for a hosted deployment; one ``default`` always exists."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, TimestampMixin

DEFAULT_TENANT_ID = "default"


class Tenant(TimestampMixin, Base):
    """A customer of a hosted deployment, or the single community of a self-hosted one."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    persona: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Replaces the default identity in the stable prompt layer."""
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    """Instructions and bot defaults, read through ``agent_core.tenancy.settings``."""
