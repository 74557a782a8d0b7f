"""The process's tools: settings, the MCP pool and the configured servers, per turn a registry.

One :class:`ToolKit` lives as long as the worker (or the embedded gateway): MCP servers
started for one turn are reused by the next. For each turn it assembles the registry of
that bot and chat (built-ins, the file's and the tenant's MCP servers, the bot's allow-list)
and the context its handlers run in.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_core.config import ToolSettings
from agent_core.crypto import CredentialBox
from agent_core.db.models import ChatSession, Tenant
from agent_core.tenancy.settings import TenantDefaults
from agent_core.tokens import TokenCounter
from agent_core.tools.base import ToolContext
from agent_core.tools.mcp.pool import McpPool
from agent_core.tools.mcp.spec import McpServerSpec, merge_servers
from agent_core.tools.mcp.tenants import tenant_specs
from agent_core.tools.registry import ToolRegistry, bot_tool_patterns


class ToolKit:
    """Builds each turn's tools.

    Args:
        settings: the tool settings (``Settings.tool_settings``).
        configured: the MCP servers of the configuration file.
        box: opens tenants' sealed MCP secrets.
    """

    def __init__(
        self,
        settings: ToolSettings,
        *,
        configured: list[McpServerSpec],
        box: CredentialBox,
    ) -> None:
        self.settings = settings
        self._configured = configured
        self._box = box
        self.pool = McpPool(
            call_timeout=settings.mcp_call_timeout, start_timeout=settings.mcp_start_timeout
        )

    def registry(
        self,
        db: Session,
        chat_session: ChatSession,
        bot_settings: dict[str, Any] | None,
        *,
        context_length: int,
        counter: TokenCounter,
        tenant_servers: bool = True,
    ) -> ToolRegistry:
        """The tools of this session's bot and chat, for one turn.

        ``bot_settings`` come with the turn's first query (``None``: the bot is gone), so
        the registry costs no read of the bot row; so does whether the tenant has MCP
        servers of its own (``tenant_servers``: without, their table is not read).
        """
        allowed = bot_tool_patterns(bot_settings)
        if allowed is None:
            tenant = db.get(Tenant, chat_session.tenant_id)
            inherited = TenantDefaults.from_json(tenant.settings if tenant else None).tools
            allowed = frozenset(inherited) if inherited is not None else self.settings.enabled
        own = tenant_specs(db, self._box, chat_session.tenant_id) if tenant_servers else []
        servers = merge_servers(self._configured, own)
        return ToolRegistry.for_turn(
            settings=self.settings,
            allowed=allowed,
            mcp=self.pool,
            servers=servers,
            chat_type=chat_session.chat_type,
            context_length=context_length,
            counter=counter,
        )

    def context(
        self,
        factory: sessionmaker[Session],
        chat_session: ChatSession,
        *,
        user_id: str | None,
        context_length: int,
    ) -> ToolContext:
        """Where this turn's tool calls happen."""
        return ToolContext(
            factory=factory,
            tenant_id=chat_session.tenant_id,
            bot_id=chat_session.bot_id,
            session_id=chat_session.id,
            conversation_key=chat_session.key,
            platform=chat_session.platform,
            chat_id=chat_session.chat_id,
            chat_type=chat_session.chat_type,
            user_id=user_id,
            timezone=self.settings.timezone,
            context_length=context_length,
        )

    def close(self) -> None:
        """Stop the MCP servers this process started."""
        self.pool.close()
