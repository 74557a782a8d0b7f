"""The per-turn agent: built fresh for every turn, :meth:`Agent.run` is the whole loop.

One turn, in order: restore the session's frozen system prompt (or build and persist it
once) → the hygiene pass → preflight → the model call (compacting and retrying, at most
three times, when the provider says the prompt does not fit) → the provider's real usage
fed to the context engine → the reply. Every compaction decision is a rule of
:mod:`agent_core.compaction.triggers`, judged on one measurement of the session; the
compactions themselves run under the session's compaction lease (:class:`Compactor`).

The agent holds one context engine for the turn and no state between turns. It returns
what happened as data (:class:`TurnOutcome`); the caller commits the reply in its own
transaction with :meth:`Agent.finish`, records metrics and delivers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_core import notices
from agent_core.compaction.runner import CompactionReport, Compactor, RunStatus
from agent_core.compaction.service import engine_state, engine_state_values, with_token_calibration
from agent_core.compaction.triggers import SessionSize, Trigger, due
from agent_core.config import CompressionSettings
from agent_core.context import (
    ContextEngine,
    DecisionReason,
    post_response_tokens,
    repair_tool_pairs,
)
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, MessageKind
from agent_core.errors import ConfigError, ContextOverflow, ProviderError
from agent_core.llm.model import ChatModel, Usage
from agent_core.llm.models import ModelSet
from agent_core.prompt.assembler import PromptAssembler
from agent_core.prompt.service import restore_or_build
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import record_reply
from agent_core.sessions.view import SessionView, load_view
from agent_core.tokens import TokenCounter, estimate_request_tokens_rough

log = logging.getLogger(__name__)

MAX_OVERFLOW_RECOVERIES = 3
"""Compress-and-retry rounds after the provider says the prompt does not fit."""
INEFFECTIVE_NOTICE_KEY = "ineffective_notified"
EMPTY_REPLY = "(The model returned an empty reply.)"


@lru_cache(maxsize=256)
def _text_tokens(counter: TokenCounter, text: str) -> int:
    """Token count of a text seen again and again (a session's frozen system prompt)."""
    return counter.count_text(text)


class TurnEnd(StrEnum):
    """How a turn ended."""

    REPLY = "reply"
    """The model answered."""
    PROVIDER_ERROR = "provider_error"
    """The model call failed; the user gets a notice instead."""
    NO_MODEL = "no_model"
    """No model is configured; the user is told what the operator must set."""
    GONE = "gone"
    """The session no longer exists (nothing to answer)."""


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """The message a turn answers."""

    session_id: str
    message_id: int
    anchor_seq: int
    """The message's transcript position: the turn sees what sits at or before it."""
    persona: str | None = None
    """The tenant's persona, which replaces the default identity in the prompt."""


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

    @property
    def kind(self) -> MessageKind:
        """How the reply is stored: chat the model sees next time, or a notice it never sees."""
        return MessageKind.CHAT if self.end is TurnEnd.REPLY else MessageKind.NOTICE

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


@dataclass(frozen=True, slots=True)
class AgentServices:
    """What every turn's agent uses; built once per process."""

    factory: sessionmaker[Session]
    counter: TokenCounter
    models: ModelSet
    prompts: PromptAssembler
    compactor: Compactor

    @property
    def compression(self) -> CompressionSettings:
        """The compression settings."""
        return self.compactor.settings


@dataclass(slots=True)
class _Loop:
    """The turn's working copy of the session, refreshed after every compaction."""

    view: SessionView
    system_prompt: str
    notices: list[str] = field(default_factory=list)
    compactions: list[CompactionReport] = field(default_factory=list)
    errors: list[ProviderError] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)


class Agent:
    """Answers one message of a session.

    Args:
        services: the process's database, models, prompt assembler and compactor.
        request: the message to answer.
    """

    def __init__(self, services: AgentServices, request: TurnRequest) -> None:
        self._services = services
        self.request = request
        self._engine: ContextEngine | None = None
        self._loop: _Loop | None = None

    # -- the loop -------------------------------------------------------------------

    def run(self) -> TurnOutcome:
        """Answer the message; never raises for a failed model call (the outcome says)."""
        try:
            model = self._services.models.main()
        except ConfigError:
            return TurnOutcome(TurnEnd.NO_MODEL, notices.NO_MODEL)
        loop = self._begin(model)
        if loop is None:
            return TurnOutcome(TurnEnd.GONE, "")
        engine = self._engine
        assert engine is not None
        self._loop = loop
        if self._services.compression.enabled:
            self._hygiene(loop, engine)
            self._preflight(loop, engine)
        return self._call(loop, engine, model)

    def _begin(self, model: ChatModel) -> _Loop | None:
        """Restore the frozen prompt and read the transcript; build the turn's engine."""
        services, request = self._services, self.request
        # Not waited to disk: a lost prompt build is simply redone by the next run.
        with transaction(services.factory, durable=False) as db:
            chat_session = db.get(ChatSession, request.session_id)
            if chat_session is None:
                return None
            system_prompt = restore_or_build(
                db,
                chat_session,
                services.prompts.inputs(chat_session, model, request.persona),
                services.prompts.today(),
                load_memory=lambda: services.prompts.memory(db, chat_session),
            )
            view = load_view(
                db, request.session_id, services.counter, up_to_anchor=request.anchor_seq
            )
        assert view is not None
        self._engine = services.compactor.engine(model, view.state)
        return _Loop(view, system_prompt)

    def _size(self, loop: _Loop) -> SessionSize:
        """The next request's size: stored counts, the system prompt, calibrated."""
        view = loop.view
        return SessionSize(
            counted_tokens=self._counted(loop),
            messages=len(view.transcript.messages),
            calibration=view.calibration,
        )

    def _counted(self, loop: _Loop) -> int:
        return loop.view.transcript.tokens + _text_tokens(
            self._services.counter, loop.system_prompt
        )

    def _hygiene(self, loop: _Loop, engine: ContextEngine) -> None:
        """The pre-agent safety net: over 85 % of the window or the message limit."""
        if due(Trigger.HYGIENE, self._size(loop), engine):
            self._compact(loop, engine, Trigger.HYGIENE)

    def _preflight(self, loop: _Loop, engine: ContextEngine) -> None:
        """Compact before the call when the request would cross the compressor threshold."""
        messages = loop.view.transcript.messages
        decision = due(
            Trigger.PREFLIGHT,
            self._size(loop),
            engine,
            rough_transcript=lambda: estimate_request_tokens_rough(messages),
        )
        if decision:
            self._compact(loop, engine, Trigger.PREFLIGHT)
        elif decision.reason is DecisionReason.INEFFECTIVE:
            self._warn_ineffective_once(loop)

    def _compact(
        self,
        loop: _Loop,
        engine: ContextEngine,
        trigger: Trigger,
        *,
        wait_seconds: float = 0.0,
    ) -> CompactionReport:
        report = self._services.compactor.run(
            self.request.session_id,
            trigger,
            up_to_anchor=self.request.anchor_seq,
            wait_seconds=wait_seconds,
        )
        loop.compactions.append(report)
        if report.aborted:
            loop.notices.append(notices.aborted_compaction(report))
        if report.status is not RunStatus.BUSY:
            self._reload(loop, engine)
        return report

    def _reload(self, loop: _Loop, engine: ContextEngine) -> None:
        """Read the transcript, state and prompt again after a compaction."""
        services = self._services
        with transaction(services.factory, durable=False) as db:
            view = load_view(
                db, self.request.session_id, services.counter, up_to_anchor=self.request.anchor_seq
            )
        if view is None:
            return
        loop.view = view
        loop.system_prompt = view.system_prompt or loop.system_prompt
        engine.on_session_start(view.state)

    def _warn_ineffective_once(self, loop: _Loop) -> None:
        with transaction(self._services.factory, durable=False) as db:
            chat_session = SessionRepository.from_session(db).get(self.request.session_id)
            if chat_session is None:
                return
            marker = chat_session.compaction_count
            if (chat_session.context_state or {}).get(INEFFECTIVE_NOTICE_KEY) == marker:
                return
            chat_session.context_state = {
                **(chat_session.context_state or {}),
                INEFFECTIVE_NOTICE_KEY: marker,
            }
        loop.notices.append(notices.INEFFECTIVE)

    def _call(self, loop: _Loop, engine: ContextEngine, model: ChatModel) -> TurnOutcome:
        """The model's reply, or the notice to send instead.

        A context-overflow error compacts and retries (at most three times); with
        compaction turned off the user is told, and nothing is compacted behind their back.
        """
        enabled = self._services.compression.enabled
        for attempt in range(MAX_OVERFLOW_RECOVERIES + 1):
            request = [
                {"role": "system", "content": loop.system_prompt},
                *_valid_for_provider(loop.view.transcript.messages),
            ]
            try:
                result = model.complete(request)
            except ContextOverflow as error:
                loop.errors.append(error)
                if not enabled:
                    return self._outcome(loop, TurnEnd.PROVIDER_ERROR, notices.OVERFLOW_DISABLED)
                if attempt == MAX_OVERFLOW_RECOVERIES:
                    return self._outcome(loop, TurnEnd.PROVIDER_ERROR, notices.OVERFLOW_STUCK)
                report = self._compact(
                    loop,
                    engine,
                    Trigger.OVERFLOW,
                    wait_seconds=self._services.compression.lease_seconds,
                )
                if report.aborted or report.status in (RunStatus.BUSY, RunStatus.LOCK_ERROR):
                    return self._outcome(
                        loop, TurnEnd.PROVIDER_ERROR, notices.provider_notice(error)
                    )
                if not report.applied:
                    return self._outcome(loop, TurnEnd.PROVIDER_ERROR, notices.OVERFLOW_STUCK)
                continue
            except ProviderError as error:
                loop.errors.append(error)
                log.warning(
                    "model call failed",
                    extra={
                        "session_id": self.request.session_id,
                        "error": type(error).__name__,
                        "status": error.status_code,
                        "reason": error.message,
                    },
                )
                return self._outcome(loop, TurnEnd.PROVIDER_ERROR, notices.provider_notice(error))
            loop.calls.append(
                ModelCall(result.model or model.name, result.usage, result.latency_seconds)
            )
            text = (result.content or "").strip() or EMPTY_REPLY
            return self._outcome(loop, TurnEnd.REPLY, text)
        raise AssertionError("unreachable")  # pragma: no cover

    def _outcome(self, loop: _Loop, end: TurnEnd, text: str) -> TurnOutcome:
        return TurnOutcome(
            end=end,
            text=text,
            calls=tuple(loop.calls),
            notices=tuple(loop.notices),
            compactions=tuple(loop.compactions),
            errors=tuple(loop.errors),
            counted_tokens=self._counted(loop),
            summary_version=loop.view.summary_version,
        )

    # -- committing -----------------------------------------------------------------

    def finish(self, db: Session, message: Message, outcome: TurnOutcome) -> Stored:
        """Store the reply, its outbox entry and the engine's judgement of the usage.

        Runs in the caller's transaction. The provider's real prompt size is fed to the
        session's stored engine state (the post-response check), unless a compaction
        committed while the model was answering: then this usage measured the transcript
        before it and says nothing about the new one.
        """
        services = self._services
        chat_session = db.get(ChatSession, self.request.session_id)
        if chat_session is None:
            return Stored(None, compact_later=False)
        meta: dict[str, Any] = {}
        if outcome.model is not None:
            meta = {"model": outcome.model, "llm_ms": round(outcome.llm_seconds * 1000, 3)}
        outbox_id = record_reply(
            db,
            chat_session,
            message,
            outcome.text,
            counter=services.counter,
            kind=outcome.kind,
            usage=_total_usage(outcome.calls),
            meta=meta,
            notices=outcome.notices,
        )
        engine, loop = self._engine, self._loop
        if outbox_id is None or engine is None or loop is None or outcome.end is not TurnEnd.REPLY:
            return Stored(outbox_id, compact_later=False)
        return Stored(outbox_id, compact_later=self._judge_usage(db, engine, loop, outcome))

    def _judge_usage(
        self, db: Session, engine: ContextEngine, loop: _Loop, outcome: TurnOutcome
    ) -> bool:
        repo = SessionRepository.from_session(db)
        stored = repo.stored_state(self.request.session_id)
        if stored is None or stored.summary_version != outcome.summary_version:
            return False
        engine.on_session_start(engine_state(stored))
        usage = outcome.usage
        engine.update_from_response(usage)
        context_state = dict(stored.context_state or {})
        if usage is not None:
            context_state = with_token_calibration(
                context_state,
                provider_tokens=usage.prompt_tokens,
                counted_tokens=outcome.counted_tokens,
            )
        repo.update_columns(
            self.request.session_id, engine_state_values(engine.state, context_state)
        )
        if not self._services.compression.enabled:
            return False
        tokens = post_response_tokens(
            engine, loop.view.transcript.messages, system_prompt=loop.system_prompt
        )
        size = SessionSize(tokens, len(loop.view.transcript.messages))
        return bool(due(Trigger.POST_RESPONSE, size, engine))


def _total_usage(calls: Sequence[ModelCall]) -> Usage | None:
    """All calls' usage together (what the turn spent)."""
    usages = [call.usage for call in calls if call.usage is not None]
    if not usages:
        return None
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages),
        total_tokens=sum(u.total_tokens for u in usages),
        cached_tokens=sum(u.cached_tokens for u in usages),
    )


def _valid_for_provider(messages: list[dict[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """``messages`` with tool pairs repaired; without tool messages there is nothing to do."""
    if any(m.get("tool_calls") or m.get("role") == "tool" for m in messages):
        return repair_tool_pairs(messages).messages
    return messages
