"""One table per module; importing this package registers them all on ``Base.metadata``."""

from agent_core.db.models.api_key import ApiKey
from agent_core.db.models.audit_event import AuditEvent
from agent_core.db.models.bot import Bot
from agent_core.db.models.compaction import Compaction
from agent_core.db.models.lock import SessionLock
from agent_core.db.models.mcp_server import TenantMcpServer
from agent_core.db.models.media import Media, MediaBlob, MediaState
from agent_core.db.models.memory import MemoryEntry, MemoryScope
from agent_core.db.models.message import Message, MessageKind, TurnState
from agent_core.db.models.outbox import OutboxEntry, OutboxState, ReplyStream
from agent_core.db.models.session import ChatSession
from agent_core.db.models.tenant import DEFAULT_TENANT_ID, Tenant
from agent_core.db.models.tool_result import StoredToolResult
from agent_core.db.models.usage import (
    Budget,
    BudgetAlert,
    BudgetLock,
    BudgetReservation,
    UsageRecord,
)

__all__ = (
    "DEFAULT_TENANT_ID",
    "ApiKey",
    "AuditEvent",
    "Bot",
    "Budget",
    "BudgetAlert",
    "BudgetLock",
    "BudgetReservation",
    "ChatSession",
    "Compaction",
    "Media",
    "MediaBlob",
    "MediaState",
    "MemoryEntry",
    "MemoryScope",
    "Message",
    "MessageKind",
    "OutboxEntry",
    "OutboxState",
    "ReplyStream",
    "SessionLock",
    "StoredToolResult",
    "Tenant",
    "TenantMcpServer",
    "TurnState",
    "UsageRecord",
)
