"""Run a session's compaction under its lease: load, compress (no transaction open), apply.

Every path that compacts goes through :class:`Compactor`: the pre-agent hygiene pass, the
preflight check, overflow recovery, ``/compress``, and the background task that keeps busy
group threads small between turns. Only the holder of the session's compaction lease
compacts; anyone else leaves the transcript as it is and lets the holder finish.

Lock errors fail closed: if the lease cannot be read or taken (the database is failing),
no compaction runs and the turn goes on with the transcript as stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.service import (
    Measurements,
    Transcript,
    apply_compaction,
    build_transcript,
    engine_state,
    store_engine_state,
    token_calibration,
)
from agent_core.config import Settings
from agent_core.context import (
    CompressionOutcome,
    CompressionResult,
    ContextEngine,
    EngineState,
    create_engine,
    preflight,
    session_hygiene,
)
from agent_core.db.base import utcnow
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession
from agent_core.errors import ConfigError
from agent_core.llm.model import ChatModel, ChatResult
from agent_core.sessions import lock
from agent_core.sessions.repository import SessionRepository
from agent_core.tokens import TokenCounter, rough_tokens
from workers import metrics
from workers.models import ModelSet
from workers.prompting import PromptAssembler

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.2
BACKGROUND_LINE_SHARE = 0.9
"""Background compaction starts at this share of the compressor threshold, a little before
it: a group thread kept under the line never makes a reply wait for a compaction."""


IDLE_LINE_SHARE = 0.4
"""A quiet session over this share of the threshold is compacted down: a session compacts
to about the tail budget (20 % of the threshold) plus its summary, so this catches one
that grew well past that since, without compacting sessions that barely changed."""


def background_line(threshold_tokens: int) -> int:
    """Where background compaction of a busy thread starts."""
    return int(threshold_tokens * BACKGROUND_LINE_SHARE)


def idle_line(threshold_tokens: int) -> int:
    """How large a quiet session must be to be compacted down."""
    return int(threshold_tokens * IDLE_LINE_SHARE)


class Trigger(StrEnum):
    """Why a compaction ran."""

    HYGIENE = "hygiene"
    PREFLIGHT = "preflight"
    OVERFLOW = "overflow"
    MANUAL = "manual"
    BACKGROUND = "background"
    IDLE = "idle"


BUSY = "busy"
LOCK_ERROR = "lock_error"
NO_MODEL = "no_model"
NOT_NEEDED = "not_needed"
SUPERSEDED = "superseded"
"""Another compaction committed while this one ran (its lease had expired); discarded."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """A session as a turn or a compaction reads it."""

    transcript: Transcript
    state: EngineState
    summary_version: int
    system_prompt: str | None
    calibration: float
    """Provider tokens per counted token, learned from the last response."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What a compaction attempt did."""

    trigger: Trigger
    outcome: str
    """A :class:`CompressionOutcome` value, or busy / lock_error / no_model / not_needed."""
    result: CompressionResult | None = None
    compaction_id: int | None = None

    @property
    def applied(self) -> bool:
        """Whether the stored transcript changed."""
        return self.compaction_id is not None

    @property
    def aborted(self) -> bool:
        """Whether the summary call failed in a way that must not drop anything."""
        return self.outcome == CompressionOutcome.ABORTED


class _Meter:
    """Thread CPU spent inside model calls, to report the compressor's own CPU."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0


class _MeteredModel:
    """A :class:`ChatModel` that adds its callers' CPU time inside ``complete`` to a meter."""

    def __init__(self, model: ChatModel, meter: _Meter) -> None:
        self._model = model
        self._meter = meter

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def context_length(self) -> int:
        return self._model.context_length

    @property
    def max_output_tokens(self) -> int | None:
        return self._model.max_output_tokens

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ChatResult:
        started = time.thread_time()
        try:
            return self._model.complete(messages, tools=tools, max_tokens=max_tokens)
        finally:
            self._meter.cpu_seconds += time.thread_time() - started


class Compactor:
    """Compacts sessions; one per process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        factory: sessionmaker[Session],
        counter: TokenCounter,
        models: ModelSet,
        prompts: PromptAssembler,
    ) -> None:
        self._settings = settings
        self._factory = factory
        self._counter = counter
        self._models = models
        self._prompts = prompts

    def engine(
        self, model: ChatModel, state: EngineState, *, summary_model: ChatModel | None = None
    ) -> ContextEngine:
        """The configured context engine for one session state."""
        return create_engine(
            self._settings.compression.engine,
            self._settings.compression,
            model=model,
            summary_model=summary_model or self._models.summary(),
            state=state,
        )

    def load(self, db: Session, session_id: str, *, up_to_anchor: int | None) -> Loaded | None:
        """The session's transcript with what compaction and the turn need around it."""
        repo = SessionRepository.from_session(db)
        # db.get: within a turn the session is already loaded, so this costs no query.
        chat_session = db.get(ChatSession, session_id)
        if chat_session is None:
            return None
        rows = repo.context_rows(session_id, up_to_anchor=up_to_anchor)
        return Loaded(
            transcript=build_transcript(rows, chat_session, self._counter),
            state=engine_state(chat_session),
            summary_version=chat_session.summary_version,
            system_prompt=chat_session.system_prompt,
            calibration=token_calibration(chat_session),
        )

    def run(
        self,
        session_id: str,
        trigger: Trigger,
        *,
        up_to_anchor: int | None = None,
        focus_topic: str | None = None,
        wait_seconds: float = 0.0,
    ) -> CompactionReport:
        """Compact the session if the trigger's rule says so, holding its lease.

        Args:
            session_id: the session.
            trigger: which rule decides (hygiene and background compact only over their
                line; preflight makes up to three passes; overflow and manual always try).
            up_to_anchor: compact only what a turn sees (messages at or before its own).
            focus_topic: what the summary should keep in most detail.
            wait_seconds: how long to wait for a busy lease (overflow recovery waits for
                the holder's result instead of failing the turn).
        """
        owner = lock.owner_identity()
        lease = self._settings.compression_lease_seconds
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                taken = lock.acquire(self._factory, session_id, lock.COMPACTION, owner, lease)
            except SQLAlchemyError:
                log.warning("compaction lock unavailable", extra={"session_id": session_id})
                metrics.ERRORS.labels("compaction_lock").inc()
                return CompactionReport(trigger, LOCK_ERROR)
            if taken:
                break
            if time.monotonic() >= deadline:
                return CompactionReport(trigger, BUSY)
            time.sleep(LOCK_POLL_SECONDS)
        try:
            with lock.LeaseKeeper(self._factory, session_id, lock.COMPACTION, owner, lease):
                report = self._run_locked(session_id, trigger, up_to_anchor, focus_topic)
            if trigger is Trigger.IDLE and not report.applied:
                with transaction(self._factory, durable=False) as db:
                    SessionRepository.from_session(db).mark_compaction_checked(session_id)
            return report
        finally:
            try:
                lock.release(self._factory, session_id, lock.COMPACTION, owner)
            except SQLAlchemyError:
                log.warning("compaction lock release failed; it will expire")

    def _run_locked(
        self,
        session_id: str,
        trigger: Trigger,
        up_to_anchor: int | None,
        focus_topic: str | None,
    ) -> CompactionReport:
        try:
            main = self._models.main()
        except ConfigError:
            return CompactionReport(trigger, NO_MODEL)
        with transaction(self._factory, durable=False) as db:
            if trigger in (Trigger.BACKGROUND, Trigger.IDLE) and not self._background_due(
                db, session_id, main, trigger
            ):
                return CompactionReport(trigger, NOT_NEEDED)
            read_at = utcnow()
            loaded = self.load(db, session_id, up_to_anchor=up_to_anchor)
        if loaded is None:
            return CompactionReport(trigger, NOT_NEEDED)
        transcript, state, version = loaded.transcript, loaded.state, loaded.summary_version
        system_prompt = loaded.system_prompt
        meter = _Meter()
        summary = self._models.summary()
        engine = self.engine(
            _MeteredModel(main, meter),
            state,
            summary_model=_MeteredModel(summary, meter) if summary else None,
        )
        counted = transcript.tokens + self._counter.count_text(system_prompt or "")
        tokens = round(counted * loaded.calibration)
        cpu_started, wall_started = time.thread_time(), time.perf_counter()
        result = self._compress(engine, transcript, trigger, tokens, system_prompt, focus_topic)
        measured = Measurements(
            cpu_ms=round((time.thread_time() - cpu_started - meter.cpu_seconds) * 1000, 3),
            wall_ms=round((time.perf_counter() - wall_started) * 1000, 3),
        )
        if result is None:
            return CompactionReport(trigger, NOT_NEEDED)
        with transaction(self._factory) as db:
            chat_session = SessionRepository.from_session(db).get(session_id, for_update=True)
            if chat_session is None or chat_session.summary_version != version:
                return CompactionReport(trigger, SUPERSEDED, result)
            if not result.applied:
                store_engine_state(chat_session, engine.state)
                return CompactionReport(trigger, result.outcome, result)
            compaction = apply_compaction(
                db,
                chat_session,
                transcript,
                result,
                engine.state,
                trigger=trigger,
                counter=self._counter,
                focus_topic=focus_topic,
                measurements=measured,
                read_at=read_at,
            )
            self._prompts.rebuild(db, chat_session, main)
            compaction_id = compaction.id
        metrics.COMPACTIONS.labels(trigger, result.strategy).inc()
        log.info(
            "compacted",
            extra={
                "session_id": session_id,
                "trigger": trigger,
                "strategy": result.strategy,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "archived": len(result.archived_indices),
                "cpu_ms": measured.cpu_ms,
            },
        )
        return CompactionReport(trigger, result.outcome, result, compaction_id)

    def _background_due(
        self, db: Session, session_id: str, model: ChatModel, trigger: Trigger
    ) -> bool:
        """A cheap look at the session row before reading its whole transcript.

        Busy groups ring for background compaction again and again while they are over
        the line; when automatic compaction is paused (cooldown, anti-thrashing) or the
        stored totals are under the line, nothing needs loading.
        """
        chat_session = db.get(ChatSession, session_id)
        if chat_session is None:
            return False
        if chat_session.active_count >= self._settings.compression.hard_message_limit:
            return True
        engine = self.engine(model, engine_state(chat_session))
        estimate = chat_session.active_tokens + rough_tokens(chat_session.summary or "")
        estimate += rough_tokens(chat_session.system_prompt or "")
        estimate = round(estimate * token_calibration(chat_session))
        if estimate < self._line(trigger, engine.threshold_tokens):
            return False
        return bool(engine.should_compress(max(estimate, engine.threshold_tokens)))

    @staticmethod
    def _line(trigger: Trigger, threshold_tokens: int) -> int:
        if trigger is Trigger.IDLE:
            return idle_line(threshold_tokens)
        return background_line(threshold_tokens)

    def _compress(
        self,
        engine: ContextEngine,
        transcript: Transcript,
        trigger: Trigger,
        tokens: int,
        system_prompt: str | None,
        focus_topic: str | None,
    ) -> CompressionResult | None:
        messages, counts = transcript.messages, transcript.token_counts
        if trigger is Trigger.HYGIENE:
            return session_hygiene(
                messages, engine, token_counts=counts, known_tokens=tokens
            ).compression
        if trigger is Trigger.PREFLIGHT:
            return preflight(
                engine, messages, system_prompt=system_prompt, token_counts=counts
            ).compression
        if trigger in (Trigger.BACKGROUND, Trigger.IDLE):
            if len(messages) >= self._settings.compression.hard_message_limit:
                return session_hygiene(
                    messages, engine, token_counts=counts, known_tokens=tokens
                ).compression
            # Below the line: nothing to do. Over it, the engine's other rules (disabled,
            # cooldown, anti-thrashing) still decide, judged as if at its threshold.
            if tokens < self._line(trigger, engine.threshold_tokens):
                return None
            if not engine.should_compress(max(tokens, engine.threshold_tokens)):
                return None
            return engine.compress(messages, current_tokens=tokens, token_counts=counts)
        return engine.compress(
            messages,
            current_tokens=tokens,
            focus_topic=focus_topic,
            force=True,
            token_counts=counts,
        )
