"""One table per module; importing this package registers them all on ``Base.metadata``."""

from agent_core.db.models.bot import Bot
from agent_core.db.models.compaction import Compaction
from agent_core.db.models.lock import SessionLock
from agent_core.db.models.memory import MemoryEntry
from agent_core.db.models.message import Message, MessageKind, TurnState
from agent_core.db.models.outbox import OutboxEntry, OutboxState
from agent_core.db.models.session import ChatSession
from agent_core.db.models.tenant import DEFAULT_TENANT_ID, Tenant

__all__ = (
    "DEFAULT_TENANT_ID",
    "Bot",
    "ChatSession",
    "Compaction",
    "MemoryEntry",
    "Message",
    "MessageKind",
    "OutboxEntry",
    "OutboxState",
    "SessionLock",
    "Tenant",
    "TurnState",
)
