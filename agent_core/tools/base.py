"""The tool interface: what a tool declares, what it may use, what it returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_core.memory.service import MemoryPlace, chat_scope_key
from agent_core.sessions.transcript import GROUP

JsonSchema = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call happens and what its handler may use (no Celery, no HTTP of ours).

    Handlers open their own short units of work with ``factory``: a tool call never runs
    inside the turn's transaction.
    """

    factory: sessionmaker[Session]
    tenant_id: str
    bot_id: int
    session_id: str
    conversation_key: str
    """The session key: every session this chat ever had shares it."""
    platform: str
    chat_id: str
    chat_type: str
    """``private`` or ``group``."""
    user_id: str | None
    """The platform id of the person whose message is being answered."""
    timezone: str = "UTC"
    """Default time zone of ``current_time`` (``HUBBUB_TIMEZONE``)."""
    context_length: int = 128_000
    """The main model's window; sizes pages of stored results."""

    @property
    def is_group(self) -> bool:
        """Whether the chat is a group (several people see the replies)."""
        return self.chat_type == GROUP

    @property
    def memory_place(self) -> MemoryPlace:
        """This chat and person as a memory scope."""
        return MemoryPlace(
            tenant_id=self.tenant_id,
            bot_id=self.bot_id,
            chat_key=chat_scope_key(self.tenant_id, self.bot_id, self.platform, self.chat_id),
            chat_type=self.chat_type,
            user_id=self.user_id,
        )


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool call gave back, as the model will read it."""

    content: str
    is_error: bool = False
    """The call failed; ``content`` says why, in words the model can act on."""
    storable: bool = True
    """``False`` for a page of a stored result (``read_tool_result``): already bounded by
    its own limit, it is neither truncated nor stored again (that would loop)."""


class ToolError(Exception):
    """Raised by a handler to refuse a call; the message is shown to the model as is."""


class Tool(ABC):
    """A tool the model can call.

    Subclasses set the class attributes and implement :meth:`call`. A handler raises
    :class:`ToolError` for a refusal the model should see; any other exception is a bug,
    logged, and reported to the model as a failure without details.
    """

    name: str
    """Unique within a turn; ``^[A-Za-z0-9_-]{1,64}$`` (the providers' rule)."""
    description: str
    parameters: JsonSchema
    """JSON schema of the arguments object; calls are validated against it."""
    deferrable: bool = False
    """May be moved behind the bridge tools when schemas take too much of the window."""
    allowed_in_groups: bool = True
    """Offered in group chats; otherwise only in private chats."""
    repeatable: bool = False
    """Running it again is harmless (it only reads, or repeats to the same effect).

    Its result is not journaled (a durable commit) before the round's next call runs:
    after a crash the call simply runs again.
    """

    @abstractmethod
    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run the tool with validated ``arguments``.

        Raises:
            ToolError: the call is refused; the message is what the model sees.
        """

    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }
