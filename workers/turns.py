"""The turn pipeline: take a session's waiting messages in order and answer each one.

For each triggering message: restore the frozen prompt, build a fresh agent and engine,
run session hygiene and the preflight check (compacting under the session's lease when
needed), call the model outside any database transaction (compacting and retrying on a
context overflow), store the reply, its outbox entry and the engine state in one
transaction, deliver it. A message's reply is unique in the outbox, so a turn that runs
twice (a redelivered task, a worker killed mid-turn) ends with exactly one reply.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_core.agent import Agent, TurnReply
from agent_core.compaction.service import (
    Transcript,
    engine_state,
    engine_state_values,
    with_token_calibration,
)
from agent_core.config import Settings
from agent_core.context import (
    ContextEngine,
    DecisionReason,
    EngineState,
    post_response_tokens,
    repair_tool_pairs,
)
from agent_core.context.hygiene import hygiene_threshold_tokens
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, MessageKind
from agent_core.errors import ConfigError, ContextOverflow, ProviderError
from agent_core.llm.model import ChatModel
from agent_core.prompt.service import restore_or_build
from agent_core.sessions import lock
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import record_reply
from agent_core.tokens import TokenCounter, estimate_request_tokens_rough
from workers import metrics
from workers.commands import CommandContext, ContextGauge, run_command
from workers.compaction import CompactionReport, Compactor, Trigger
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher
from workers.models import ModelSet
from workers.prompting import PromptAssembler

log = logging.getLogger(__name__)

PENDING_BATCH = 20
"""Waiting messages fetched per query while draining a session."""
MAX_OVERFLOW_RECOVERIES = 3
"""Compress-and-retry rounds after the provider says the prompt does not fit."""
INEFFECTIVE_NOTICE_KEY = "ineffective_notified"

NO_MODEL_NOTICE = (
    "No model is configured, so I cannot answer yet. The operator needs to set HUBBUB_MODEL "
    "(any litellm model string, e.g. openai/gpt-4o-mini) and the provider's API key "
    "(HUBBUB_LLM_API_KEY or the provider's usual variable), then restart Hubbub."
)
OVERFLOW_DISABLED_NOTICE = (
    "This conversation no longer fits the model's context window, and automatic compaction "
    "is turned off here, so nothing was compacted. Use /compress to summarise older turns, "
    "/new to start a fresh session, or switch to a model with a larger window."
)
OVERFLOW_STUCK_NOTICE = (
    "This conversation no longer fits the model's context window, and nothing more of it "
    "can be compacted. Use /new to start a fresh session (this one is kept), or switch to "
    "a model with a larger window."
)
INEFFECTIVE_NOTICE = (
    "Automatic compaction has stopped: the last compactions saved too little. Use "
    "/compress <topic> to summarise with a focus, or /new to start a fresh session."
)


@lru_cache(maxsize=256)
def _text_tokens(counter: TokenCounter, text: str) -> int:
    """Token count of a text seen again and again (a session's frozen system prompt)."""
    return counter.count_text(text)


def _valid_for_provider(messages: list[dict[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """``messages`` with tool pairs repaired; without tool messages there is nothing to do."""
    if any(m.get("tool_calls") or m.get("role") == "tool" for m in messages):
        return repair_tool_pairs(messages).messages
    return messages


def provider_notice(error: ProviderError) -> str:
    """The short reply a user sees when the model call failed."""
    reason = {
        "ContextOverflow": "the conversation no longer fits the model's context window",
        "ProviderAuthError": "the model provider refused our credentials",
        "ProviderRateLimited": "the model provider is rate-limiting us",
        "ProviderUnavailable": "the model provider is unavailable right now",
    }.get(type(error).__name__, "the model provider rejected the request")
    return f"Sorry, I could not answer: {reason}. Please try again in a moment."


def aborted_notice(report: CompactionReport) -> str:
    """The one-line warning shown when a compaction stopped with nothing dropped."""
    reason = report.result.detail if report.result is not None else ""
    return (
        f"⚠️ Compacting this conversation failed ({reason or 'summary model unavailable'}); "
        "nothing was dropped. Use /compress to try again."
    )


@dataclass(slots=True)
class _Turn:
    """Everything a turn carries between its steps."""

    message: Message
    chat_session: ChatSession
    system_prompt: str
    transcript: Transcript
    state: EngineState
    summary_version: int
    calibration: float
    notices: list[str]


class TurnRunner:
    """Runs turns for sessions; one instance per process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        factory: sessionmaker[Session],
        delivery: DeliveryService,
        models: ModelSet,
        *,
        stopping: threading.Event,
    ) -> None:
        self._settings = settings
        self._factory = factory
        self._delivery = delivery
        self._models = models
        self._stopping = stopping
        self._counter = TokenCounter.for_model(settings.model)
        self.prompts = PromptAssembler(settings)
        self.compactor = Compactor(settings, factory, self._counter, models, self.prompts)
        self.dispatcher: Dispatcher | None = None

    # -- draining ---------------------------------------------------------------------

    def drain(self, session_id: str) -> int:
        """Answer the session's waiting messages in arrival order; returns how many.

        Only the holder of the session's turn lease works; anyone else returns at once,
        and the holder looks for new messages again as it releases, so none is stranded.
        """
        processed = 0
        lease = self._settings.turn_lease_seconds
        while True:
            owner = lock.owner_identity()
            with transaction(self._factory, durable=False) as db:
                if not lock.try_acquire(db, session_id, lock.TURN, owner, lease):
                    return processed
                batch = SessionRepository.from_session(db).pending_message_ids(
                    session_id, limit=PENDING_BATCH
                )
            try:
                with lock.LeaseKeeper(self._factory, session_id, lock.TURN, owner, lease):
                    processed += self._run_batches(session_id, batch)
            finally:
                with transaction(self._factory, durable=False) as db:
                    lock.release_in(db, session_id, lock.TURN, owner)
                    waiting = SessionRepository.from_session(db).has_pending(session_id)
            if not waiting:
                return processed
            if self._stopping.is_set():
                if self.dispatcher is not None:
                    self.dispatcher.kick_session(session_id)
                return processed

    def _run_batches(self, session_id: str, batch: list[int]) -> int:
        processed = 0
        while True:
            for message_id in batch:
                if self._stopping.is_set():
                    return processed
                self.run_turn(message_id)
                processed += 1
            if len(batch) < PENDING_BATCH:
                return processed  # the look as the lease is released catches anything newer
            with transaction(self._factory) as db:
                batch = SessionRepository.from_session(db).pending_message_ids(
                    session_id, limit=PENDING_BATCH
                )

    # -- one turn ---------------------------------------------------------------------

    def run_turn(self, message_id: int) -> None:
        """Answer one message (idempotent: a message already answered is left alone)."""
        started = time.perf_counter()
        llm_seconds = 0.0
        outbox_id, turn = self._begin(message_id)
        if turn is not None:
            outbox_id, llm_seconds = self._answer(turn)
        if outbox_id is not None:
            self._delivery.deliver(outbox_id)
        elapsed = time.perf_counter() - started
        metrics.TURN_SECONDS.observe(elapsed)
        metrics.TURN_OVERHEAD_SECONDS.observe(max(elapsed - llm_seconds, 0.0))

    def _begin(self, message_id: int) -> tuple[int | None, _Turn | None]:
        """Load the turn; commands and configuration errors are answered right here."""
        # Not waited to disk (see _store); a lost prompt build is simply redone.
        with transaction(self._factory, durable=False) as db:
            repo = SessionRepository.from_session(db)
            pending = repo.load_turn(message_id)
            if pending is None:
                return None, None
            message, chat_session, persona = pending
            command = str(message.meta.get("command", "")) if message.kind == "command" else ""
            try:
                model = self._models.main()
            except ConfigError:
                model = None
            if command and command not in ("compress", "compact"):
                text = run_command(command, self._command_context(db, chat_session, message, model))
                metrics.TURNS.labels("command").inc()
                return self._record(db, chat_session, message, text, MessageKind.COMMAND), None
            if model is None:
                metrics.TURNS.labels("config_error").inc()
                metrics.ERRORS.labels("no_model").inc()
                notice = self._record(
                    db, chat_session, message, NO_MODEL_NOTICE, MessageKind.NOTICE
                )
                return notice, None
            system_prompt = restore_or_build(
                db,
                chat_session,
                self.prompts.inputs(chat_session, model, persona),
                self.prompts.today(),
                load_memory=lambda: self.prompts.memory(db, chat_session),
            )
            view = self.compactor.load(db, chat_session.id, up_to_anchor=message.anchor_seq)
            assert view is not None
        if command:
            return self._compress_command(message, chat_session, model), None
        self._delivery.typing(chat_session)
        turn = _Turn(
            message,
            chat_session,
            system_prompt,
            view.transcript,
            view.state,
            view.summary_version,
            view.calibration,
            [],
        )
        return None, turn

    def _answer(self, turn: _Turn) -> tuple[int | None, float]:
        """Keep the context in bounds, call the model, store the reply; (outbox id, LLM s)."""
        model = self._models.main()
        engine = self.compactor.engine(model, turn.state)
        if self._settings.compression.enabled:
            self._hygiene(turn, engine, model)
            self._preflight(turn, model)
        reply, notice = self._call_model(turn, model)
        if reply is None:
            metrics.TURNS.labels("provider_error").inc()
            return self._store(turn, notice, MessageKind.NOTICE, None, model), 0.0
        metrics.TURNS.labels("reply").inc()
        return self._store(turn, reply.text, MessageKind.CHAT, reply, model), reply.llm_seconds

    def _hygiene(self, turn: _Turn, engine: ContextEngine, model: ChatModel) -> None:
        """The pre-agent safety net: over 85 % of the window or the message limit."""
        settings = self._settings.compression
        tokens = self._prompt_tokens(turn)
        over_limit = len(turn.transcript.messages) >= settings.hard_message_limit
        if over_limit or tokens >= hygiene_threshold_tokens(engine):
            self._compact(turn, Trigger.HYGIENE, model)

    def _preflight(self, turn: _Turn, model: ChatModel) -> None:
        """Compact before the call when the request would cross the compressor threshold."""
        engine = self.compactor.engine(model, turn.state)
        decision = engine.should_compress(self._prompt_tokens(turn))
        if decision:
            # Only now is the rough estimate worth computing (it walks the transcript).
            rough = estimate_request_tokens_rough(turn.transcript.messages)
            if not engine.should_defer_preflight(rough):
                self._compact(turn, Trigger.PREFLIGHT, model)
        elif decision.reason is DecisionReason.INEFFECTIVE:
            self._warn_ineffective_once(turn)

    def _counted_tokens(self, turn: _Turn) -> int:
        """Our exact count of the next request: stored counts plus the system prompt."""
        return turn.transcript.tokens + _text_tokens(self._counter, turn.system_prompt)

    def _prompt_tokens(self, turn: _Turn) -> int:
        """The next request's size as the provider will count it (calibrated)."""
        return round(self._counted_tokens(turn) * turn.calibration)

    def _compact(
        self, turn: _Turn, trigger: Trigger, model: ChatModel, *, wait_seconds: float = 0.0
    ) -> CompactionReport:
        report = self.compactor.run(
            turn.chat_session.id,
            trigger,
            up_to_anchor=turn.message.anchor_seq,
            wait_seconds=wait_seconds,
        )
        if report.aborted:
            turn.notices.append(aborted_notice(report))
        if report.applied or report.outcome != "busy":
            self._reload(turn)
        return report

    def _reload(self, turn: _Turn) -> None:
        """Read the transcript, state and prompt again after a compaction."""
        with transaction(self._factory, durable=False) as db:
            loaded = self.compactor.load(
                db, turn.chat_session.id, up_to_anchor=turn.message.anchor_seq
            )
        if loaded is None:
            return
        turn.transcript, turn.state = loaded.transcript, loaded.state
        turn.summary_version, turn.calibration = loaded.summary_version, loaded.calibration
        turn.system_prompt = loaded.system_prompt or turn.system_prompt

    def _warn_ineffective_once(self, turn: _Turn) -> None:
        with transaction(self._factory, durable=False) as db:
            chat_session = SessionRepository.from_session(db).get(turn.chat_session.id)
            if chat_session is None:
                return
            marker = chat_session.compaction_count
            if (chat_session.context_state or {}).get(INEFFECTIVE_NOTICE_KEY) == marker:
                return
            chat_session.context_state = {
                **(chat_session.context_state or {}),
                INEFFECTIVE_NOTICE_KEY: marker,
            }
        turn.notices.append(INEFFECTIVE_NOTICE)

    def _call_model(self, turn: _Turn, model: ChatModel) -> tuple[TurnReply | None, str]:
        """The model's reply, or ``None`` and the notice to send instead.

        A context-overflow error compacts and retries (at most three times); with
        compaction turned off the user is told, and nothing is compacted behind their back.
        """
        for attempt in range(MAX_OVERFLOW_RECOVERIES + 1):
            agent = Agent(model, system_prompt=turn.system_prompt)
            try:
                reply = agent.respond(_valid_for_provider(turn.transcript.messages))
            except ContextOverflow as error:
                metrics.ERRORS.labels("ContextOverflow").inc()
                if not self._settings.compression.enabled:
                    return None, OVERFLOW_DISABLED_NOTICE
                if attempt == MAX_OVERFLOW_RECOVERIES:
                    return None, OVERFLOW_STUCK_NOTICE
                report = self._compact(
                    turn,
                    Trigger.OVERFLOW,
                    model,
                    wait_seconds=self._settings.compression_lease_seconds,
                )
                if report.aborted or report.outcome in ("busy", "lock_error"):
                    return None, provider_notice(error)
                if not report.applied:
                    return None, OVERFLOW_STUCK_NOTICE
                continue
            except ProviderError as error:
                metrics.ERRORS.labels(type(error).__name__).inc()
                log.warning(
                    "model call failed",
                    extra={
                        "session_id": turn.chat_session.id,
                        "error": type(error).__name__,
                        "status": error.status_code,
                        "reason": error.message,
                    },
                )
                return None, provider_notice(error)
            metrics.LLM_SECONDS.observe(reply.llm_seconds)
            if reply.usage is not None:
                metrics.LLM_TOKENS.labels("prompt").inc(reply.usage.prompt_tokens)
                metrics.LLM_TOKENS.labels("completion").inc(reply.usage.completion_tokens)
            return reply, ""
        raise AssertionError("unreachable")  # pragma: no cover

    def _store(
        self,
        turn: _Turn,
        text: str,
        kind: MessageKind,
        reply: TurnReply | None,
        model: ChatModel,
    ) -> int | None:
        """Store the reply with the engine's judgement of the provider's real usage.

        Not waited to disk: if a crash loses it, the message is still pending and its turn
        runs again; the durable delivery claim that follows flushes it first, so a reply is
        never sent for a turn the database forgot.
        """
        compact_later = False
        with transaction(self._factory, durable=False) as db:
            # The turn's own copy of the session has what a reply needs (ids, chat); the
            # reply's sequence number row-locks the session for the state update below.
            outbox_id = self._record(
                db, turn.chat_session, turn.message, text, kind, reply, notices=turn.notices
            )
            if outbox_id is not None and reply is not None:
                compact_later = self._judge_usage(db, turn, reply, model)
        if compact_later and self.dispatcher is not None:
            self.dispatcher.kick_compaction(turn.chat_session.id)
        return outbox_id

    def _judge_usage(self, db: Session, turn: _Turn, reply: TurnReply, model: ChatModel) -> bool:
        """Feed the provider's real prompt size to the engine; True when it asks to compact.

        If a compaction committed while the model was answering, this usage measured the
        transcript before it and says nothing about the new one, so it is not applied.
        """
        repo = SessionRepository.from_session(db)
        stored = repo.stored_state(turn.chat_session.id)
        if stored is None or stored.summary_version != turn.summary_version:
            return False
        engine = self.compactor.engine(model, engine_state(stored))
        engine.update_from_response(reply.usage)
        context_state = dict(stored.context_state or {})
        if reply.usage is not None:
            context_state = with_token_calibration(
                context_state,
                provider_tokens=reply.usage.prompt_tokens,
                counted_tokens=self._counted_tokens(turn),
            )
        repo.update_columns(turn.chat_session.id, engine_state_values(engine.state, context_state))
        if not self._settings.compression.enabled:
            return False
        tokens = post_response_tokens(
            engine, turn.transcript.messages, system_prompt=turn.system_prompt
        )
        return bool(engine.should_compress(tokens))

    def _record(
        self,
        db: Session,
        chat_session: ChatSession,
        message: Message,
        text: str,
        kind: MessageKind,
        reply: TurnReply | None = None,
        *,
        notices: list[str] | None = None,
    ) -> int | None:
        meta: dict[str, Any] = {}
        if reply is not None:
            meta = {"model": reply.model, "llm_ms": round(reply.llm_seconds * 1000, 3)}
        return record_reply(
            db,
            chat_session,
            message,
            text,
            counter=self._counter,
            kind=kind,
            usage=reply.usage if reply is not None else None,
            meta=meta,
            notices=notices or (),
        )

    # -- commands ---------------------------------------------------------------------

    def _command_context(
        self, db: Session, chat_session: ChatSession, message: Message, model: ChatModel | None
    ) -> CommandContext:
        gauge = None
        if model is not None:
            engine = self.compactor.engine(model, engine_state(chat_session))
            gauge = ContextGauge(
                context_length=engine.context_length,
                threshold_tokens=engine.threshold_tokens,
                hygiene_threshold_tokens=hygiene_threshold_tokens(engine),
                used_tokens=engine.last_prompt_tokens
                or chat_session.active_tokens
                + self._counter.count_text(chat_session.system_prompt or ""),
                measured=engine.last_prompt_tokens > 0,
            )
        return CommandContext(
            db=db,
            chat_session=chat_session,
            message=message,
            args=str(message.meta.get("command_args", "")),
            gauge=gauge,
        )

    def _compress_command(
        self, message: Message, chat_session: ChatSession, model: ChatModel | None
    ) -> int | None:
        """``/compress [focus]``: compact now (no cooldown), report what happened."""
        focus = str(message.meta.get("command_args", "")).strip() or None
        if model is None:
            text = NO_MODEL_NOTICE
        else:
            report = self.compactor.run(
                chat_session.id,
                Trigger.MANUAL,
                up_to_anchor=message.anchor_seq,
                focus_topic=focus,
                wait_seconds=self._settings.compression_lease_seconds,
            )
            text = describe_manual_compaction(report)
        with transaction(self._factory, durable=False) as db:
            fresh = SessionRepository.from_session(db).get(chat_session.id)
            assert fresh is not None
            metrics.TURNS.labels("command").inc()
            return self._record(db, fresh, message, text, MessageKind.COMMAND)


SUMMARY_PREVIEW_LINES = 6


def describe_manual_compaction(report: CompactionReport) -> str:
    """What ``/compress`` tells the user: strategy, tokens before and after, summary start."""
    result = report.result
    if report.outcome == "busy":
        return "Another compaction of this conversation is running; try again in a moment."
    if report.outcome == "lock_error":
        return "Compaction is unavailable right now (the database is not answering)."
    if result is None or not report.applied:
        if report.aborted:
            return aborted_notice(report)
        if result is not None and result.outcome == "nothing_to_compress":
            return (
                "Nothing to compress yet: the whole conversation is in the protected recent turns."
            )
        detail = result.detail if result is not None else report.outcome
        return f"Nothing was compressed ({detail or report.outcome})."
    body = (result.summary or "").strip().splitlines()
    preview = "\n".join(line for line in body if line.strip())
    preview_lines = "\n".join(preview.splitlines()[:SUMMARY_PREVIEW_LINES])
    saved = result.tokens_before - result.tokens_after
    fallback = " (deterministic digest: the summary model failed)" if result.fallback_used else ""
    return (
        f"Compressed {len(result.archived_indices)} messages with {result.strategy}{fallback}: "
        f"{result.tokens_before:,} → {result.tokens_after:,} tokens ({saved:,} saved). "
        f"The originals are archived.\n\nSummary:\n{preview_lines}"
    )
