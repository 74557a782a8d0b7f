"""What a turn is asked and what it hands back: plain data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent_core.busy import BusyMode, Interruption
from agent_core.compaction.runner import CompactionReport
from agent_core.db.models import MessageKind
from agent_core.errors import ProviderError
from agent_core.llm.model import TextSink, Usage
from agent_core.sessions.repository import TurnStart
from agent_core.tenancy.settings import TenantDefaults


class TurnEnd(StrEnum):
    """How a turn ended."""

    REPLY = "reply"
    """The model answered."""
    PROVIDER_ERROR = "provider_error"
    """The model call failed; the user gets a notice instead."""
    STEP_LIMIT = "step_limit"
    """The model was still calling tools at the iteration cap; it answered without them."""
    NO_MODEL = "no_model"
    """No model is configured; the user is told what the operator must set."""
    GONE = "gone"
    """The session no longer exists (nothing to answer)."""
    BUDGET = "budget"
    """A budget is used up: the user is told, and no model was called for it."""
    INTERRUPTED = "interrupted"
    """A newer message or ``/stop`` stopped the turn at a safe point: no reply of its own."""


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """The message a turn answers."""

    session_id: str
    message_id: int
    anchor_seq: int
    """The message's transcript position: the turn sees what sits at or before it."""
    persona: str | None = None
    """The tenant's persona, which replaces the default identity in the prompt."""
    tenant_id: str = ""
    """The session's tenant (metrics are counted per tenant)."""
    user_id: str | None = None
    """The person being answered (budgets and usage per user)."""
    instructions: str | None = None
    """The tenant's instructions, added to the operator's in the prompt."""
    tenant: TenantDefaults | None = None
    """The tenant's stored settings when the caller read them with the message (its
    compression thresholds apply); ``None``: the agent reads them."""
    busy_mode: BusyMode = BusyMode.STEER
    """What messages arriving meanwhile do (:mod:`agent_core.busy`); the library default
    steers them into a running tool loop."""
    model: str | None = None
    """The session's model (``/model``, else its tenant's default); ``None``: ``HUBBUB_MODEL``."""
    on_text: TextSink | None = None
    """Where the reply's text goes while the model streams it (the worker's draft
    streamer); ``None``: not streamed. The agent itself still delivers nothing."""
    start: TurnStart | None = None
    """The turn's first read (:meth:`SessionRepository.turn_start`) when the caller made it
    and wrote nothing of the session since; ``None``: the agent reads it."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call to the main model within a turn."""

    model: str
    usage: Usage | None
    seconds: float


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What one turn did, for the caller to commit, measure and deliver."""

    end: TurnEnd
    text: str
    """The reply, or the notice shown instead."""
    calls: tuple[ModelCall, ...] = ()
    notices: tuple[str, ...] = ()
    """Warnings shown above the reply, never part of the transcript."""
    compactions: tuple[CompactionReport, ...] = ()
    errors: tuple[ProviderError, ...] = ()
    """Provider errors met on the way (an overflow that was recovered from included)."""
    counted_tokens: int = 0
    """Our count of the last request (what the provider's count calibrates)."""
    summary_version: int = 0
    """The session's summary version the last request was built from."""

    tool_calls: int = 0
    """Tool calls the model made in this turn."""
    tool_seconds: float = 0.0
    """Time spent running them (MCP servers, searches), not storing their results."""
    steered: int = 0
    """Messages this turn took in through the steer channel."""
    interrupted: Interruption | None = None
    """What stopped the turn (``TurnEnd.INTERRUPTED``)."""

    @property
    def answered(self) -> bool:
        """Whether the model wrote the reply (rather than Hubbub a notice)."""
        return self.end in (TurnEnd.REPLY, TurnEnd.STEP_LIMIT)

    @property
    def kind(self) -> MessageKind:
        """How the reply is stored: chat the model sees next time, or a notice it never sees."""
        return MessageKind.CHAT if self.answered else MessageKind.NOTICE

    @property
    def usage(self) -> Usage | None:
        """The provider's usage of the last call (the real size of the last prompt)."""
        return self.calls[-1].usage if self.calls else None

    @property
    def llm_seconds(self) -> float:
        """Time spent waiting for the provider, retries included."""
        return sum(call.seconds for call in self.calls)

    @property
    def model(self) -> str | None:
        """The model that answered."""
        return self.calls[-1].model if self.calls else None


@dataclass(frozen=True, slots=True)
class Stored:
    """What :meth:`Agent.finish` stored."""

    outbox_id: int | None
    """``None`` when another run of the turn had already answered it."""
    compact_later: bool
    """The provider's usage says the session should be compacted off the reply path."""
    closed: bool = True
    """A stopped turn: whether this run closed it (``False``: another run did first)."""
    stopped: TurnOutcome | None = None
    """The turn's outcome when a stop was found as its reply was about to be stored (the
    last safe point): the reply was discarded and the turn closed instead."""
