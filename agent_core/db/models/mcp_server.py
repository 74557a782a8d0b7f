"""A tenant's Model Context Protocol servers, whose tools its bots offer."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin


class TenantMcpServer(TimestampMixin, Base):
    """One MCP server of a tenant: a command over stdio, or a streamable HTTP URL."""

    __tablename__ = "mcp_servers"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    name: Mapped[str] = mapped_column(String(32), nullable=False)
    """Prefix of its tools' names: ``<name>__<tool>``."""
    command: Mapped[str | None] = mapped_column(Text, nullable=True)
    args: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    secrets: Mapped[str | None] = mapped_column(Text, nullable=True)
    """``{"env": {...}, "headers": {...}}`` sealed with the secret key (never logged)."""
    options: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    """``timeout`` (seconds per call) and ``groups`` (offered in group chats)."""
