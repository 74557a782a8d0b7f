"""The turn pipeline: take a session's waiting messages in order and answer them.

Only the holder of a session's turn lease drains it. The bot's busy mode decides which
waiting messages get a turn (``collect`` and ``interrupt`` answer a run of them with one
turn, to the latest; :mod:`agent_core.busy`). For each turn: commands
are answered here; anything else goes to a fresh :class:`~agent_core.agent.Agent`, whose
``run`` is the whole loop (prompt, hygiene, preflight, model call, overflow recovery).
Its reply, outbox entry and engine state are committed in one transaction, metrics are
recorded and the reply is delivered. A message's reply is unique in the outbox, so a turn
that runs twice (a redelivered task, a worker killed mid-turn) ends with exactly one reply.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from sqlalchemy.orm import Session, sessionmaker

from agent_core import busy, notices, tracing
from agent_core.agent import Agent, AgentServices, TurnEnd, TurnOutcome, TurnRequest
from agent_core.busy import BusyMode, TurnPlan, Waiting
from agent_core.commands import (
    COMPACTION_COMMANDS,
    STOPPED_REPLY,
    CommandContext,
    ContextGauge,
    run_command,
)
from agent_core.compaction.runner import CompactionReport, RunStatus
from agent_core.compaction.service import engine_state
from agent_core.compaction.triggers import Trigger
from agent_core.config import Settings
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import ChatSession, Message, MessageKind, TurnState
from agent_core.errors import ConfigError
from agent_core.llm.model import ChatModel
from agent_core.sessions import lock
from agent_core.sessions.repository import DrainStart, SessionRepository
from agent_core.sessions.service import record_reply
from agent_core.tenancy.settings import TenantDefaults, effective_busy_mode, model_choice
from workers import metrics
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher
from workers.media import MediaFetchStep
from workers.streaming import DraftStreamer, StreamService

log = logging.getLogger(__name__)

PENDING_BATCH = 20
"""Waiting messages fetched per query while draining a session."""


def record_compaction_metrics(
    reports: tuple[CompactionReport, ...] | list[CompactionReport],
) -> None:
    """Count what compactions did (the compactor itself records no metrics)."""
    for report in reports:
        if report.applied and report.result is not None:
            metrics.COMPACTIONS.labels(report.trigger, report.result.strategy).inc()
        elif report.status is RunStatus.LOCK_ERROR:
            metrics.ERRORS.labels("compaction_lock").inc()
        elif report.status is RunStatus.OVER_BUDGET and report.tenant_id is not None:
            metrics.TENANT_COMPACTIONS_OVER_BUDGET.labels(report.tenant_id).inc()


def _log_turn(
    request: TurnRequest, outcome: TurnOutcome | None, kind: str | None, seconds: float
) -> None:
    """One INFO line per turn: who, how long, what it cost, how it ended; never the text."""
    calls = outcome.calls if outcome is not None else ()
    log.info(
        "turn",
        extra={
            "session_id": request.session_id,
            "message_id": request.message_id,
            "outcome": kind or (str(outcome.end) if outcome is not None else "gone"),
            "latency_ms": round(seconds * 1000),
            "model_calls": len(calls),
            "prompt_tokens": sum(c.usage.prompt_tokens for c in calls if c.usage is not None),
            "completion_tokens": sum(
                c.usage.completion_tokens for c in calls if c.usage is not None
            ),
        },
    )


def _turn_attributes(
    request: TurnRequest | None, outcome: TurnOutcome | None, kind: str | None
) -> dict[str, str | int]:
    """What the turn span says about how the turn went: its end and what it spent."""
    if request is None:
        return {"hubbub.outcome": "gone"}
    calls = outcome.calls if outcome is not None else ()
    return {
        "hubbub.outcome": kind or (str(outcome.end) if outcome is not None else "gone"),
        "hubbub.model_calls": len(calls),
        "hubbub.tool_calls": outcome.tool_calls if outcome is not None else 0,
        "gen_ai.usage.input_tokens": sum(c.usage.prompt_tokens for c in calls if c.usage),
        "gen_ai.usage.output_tokens": sum(c.usage.completion_tokens for c in calls if c.usage),
    }


class StopLook:
    """Whether a ``/stop`` waits behind a message: the ``should_stop`` of a compaction.

    Called before each summary call (from several threads at once): one indexed read,
    small beside the call it may save.
    """

    def __init__(self, factory: sessionmaker[Session], session_id: str, *, after_seq: int) -> None:
        self._factory = factory
        self._session_id = session_id
        self._after_seq = after_seq
        self.stop_id: int | None = None
        """The ``/stop`` found, once one was."""

    def __call__(self) -> bool:
        """Whether a ``/stop`` came (it stays found once it did)."""
        if self.stop_id is None:
            with read_transaction(self._factory) as db:
                newer = SessionRepository.from_session(db).waiting(
                    self._session_id, limit=PENDING_BATCH, after_seq=self._after_seq
                )
            found = busy.interruption(newer, BusyMode.QUEUE)  # a /stop, whatever the mode
            if found is not None:
                self.stop_id = found.by
        return self.stop_id is not None


class TurnRunner:
    """Runs turns for sessions; one instance per process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        services: AgentServices,
        delivery: DeliveryService,
        *,
        stopping: threading.Event,
        media: MediaFetchStep | None = None,
    ) -> None:
        self._settings = settings
        self._services = services
        self._media = media
        self._factory: sessionmaker[Session] = services.factory
        self._delivery = delivery
        self._streams = StreamService(
            settings, services.factory, delivery.draft_editor, delivery.draft_publisher
        )
        self._stopping = stopping
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
                start = SessionRepository.from_session(db).drain_start(
                    session_id, limit=PENDING_BATCH
                )
                mode = self._busy_mode(start)
                batch = start.waiting if start is not None else []
            try:
                with lock.LeaseKeeper(self._factory, session_id, lock.TURN, owner, lease):
                    processed += self._run_batches(session_id, mode, batch)
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

    def _busy_mode(self, start: DrainStart | None) -> BusyMode:
        """The session's bot's busy mode, else its tenant's, else the deployment's."""
        own, tenant = (start.own_busy_mode, start.tenant_settings) if start else (None, {})
        return effective_busy_mode(own, TenantDefaults.from_json(tenant), self._settings.busy_mode)

    def _run_batches(self, session_id: str, mode: BusyMode, batch: list[Waiting]) -> int:
        processed = 0
        while True:
            batch = self._collected(session_id, mode, batch)
            for plan in busy.plan_turns(batch, mode):
                if self._stopping.is_set():
                    return processed
                self._absorb(plan)
                self.run_turn(plan.answer, mode)
                processed += 1 + len(plan.absorbed)
            if len(batch) < PENDING_BATCH:
                return processed  # the look as the lease is released catches anything newer
            with transaction(self._factory) as db:
                batch = SessionRepository.from_session(db).waiting(session_id, limit=PENDING_BATCH)

    def _collected(self, session_id: str, mode: BusyMode, batch: list[Waiting]) -> list[Waiting]:
        """``collect``: the waiting messages once the window after the first has passed.

        The lease is held (and renewed) meanwhile, so quick follow-ups wait for this turn
        instead of starting their own in another worker.
        """
        window = self._settings.collect_window_seconds
        left = busy.collect_wait_seconds(batch, mode, now=utcnow(), window=window)
        if left <= 0 or self._stopping.wait(left):
            return batch
        with transaction(self._factory, durable=False) as db:
            return SessionRepository.from_session(db).waiting(session_id, limit=PENDING_BATCH)

    def _absorb(self, plan: TurnPlan) -> None:
        """Mark the messages a collected turn answers with its own (no turn, no reply each)."""
        if not plan.absorbed:
            return
        with transaction(self._factory, durable=False) as db:
            repo = SessionRepository.from_session(db)
            closed = sum(
                repo.close_unanswered(message_id, {busy.ANSWERED_BY: plan.answer})
                for message_id in plan.absorbed
            )
        metrics.TURNS.labels("collected").inc(closed)

    def compact(
        self, session_id: str, trigger: Trigger, *, link: str | None = None
    ) -> CompactionReport:
        """Compact a session off the reply path (busy or quiet group threads between turns).

        ``link`` is the traceparent of the span that asked for it, if traced.
        """
        report = self._services.compactor.run(session_id, trigger, link=link)
        record_compaction_metrics([report])
        return report

    # -- one turn ---------------------------------------------------------------------

    def run_turn(self, message_id: int, mode: BusyMode = BusyMode.QUEUE) -> None:
        """Answer one message (idempotent: a message already answered is left alone).

        ``mode`` is the session's busy mode (whether the turn steers, what stops it).

        With tracing on, the turn is a span continuing the message's trace (the
        traceparent stored at intake), whoever rang for it: the doorbell or the sweeper.
        """
        if not tracing.enabled():
            self._run_turn(message_id, mode)
            return
        origin = self._origin(message_id)
        parent = origin.pop(tracing.TRACEPARENT, None)
        with tracing.span(
            "hubbub.turn", parent=str(parent) if parent else None, kind=tracing.SpanKind.CONSUMER
        ) as span:
            span.set_attributes(origin)
            request, outcome, kind = self._run_turn(message_id, mode)
            span.set_attributes(_turn_attributes(request, outcome, kind))

    def _origin(self, message_id: int) -> dict[str, str | int]:
        """Who the message came from and its stored trace, for the turn's span."""
        with transaction(self._factory, durable=False) as db:
            message = db.get(Message, message_id)
            chat_session = db.get(ChatSession, message.session_id) if message else None
            if message is None or chat_session is None:
                return {"hubbub.message_id": message_id}
            origin: dict[str, str | int] = {
                "hubbub.message_id": message_id,
                "hubbub.session_id": chat_session.id,
                "hubbub.tenant": chat_session.tenant_id,
                "hubbub.bot": chat_session.bot_id,
                "hubbub.platform": chat_session.platform,
            }
            stored = message.meta.get(tracing.TRACEPARENT)
            if isinstance(stored, str):
                origin[tracing.TRACEPARENT] = stored
            return origin

    def _run_turn(
        self, message_id: int, mode: BusyMode
    ) -> tuple[TurnRequest | None, TurnOutcome | None, str | None]:
        started = time.perf_counter()
        llm_seconds = 0.0
        outcome: TurnOutcome | None = None
        outbox_id, request, command = self._begin(message_id, mode)
        if request is not None and command is not None:
            outbox_id = self._compress_command(request, command)
        elif request is not None:
            outbox_id, outcome = self._answer(request)
            llm_seconds = outcome.llm_seconds if outcome is not None else 0.0
        if outbox_id is not None:
            self._delivery.deliver(outbox_id)
        elapsed = time.perf_counter() - started
        metrics.TURN_SECONDS.observe(elapsed)
        metrics.TURN_OVERHEAD_SECONDS.observe(max(elapsed - llm_seconds, 0.0))
        kind = "command" if command is not None else None
        if request is not None:
            _log_turn(request, outcome, kind, elapsed)
        return request, outcome, kind

    def _begin(
        self, message_id: int, mode: BusyMode
    ) -> tuple[int | None, TurnRequest | None, str | None]:
        """Load the turn and fetch its images; commands needing no model call are answered here.

        Returns the outbox id of an answer given here, or the turn to run (with the focus
        of a ``/compress``, when it is one).
        """
        # Not waited to disk (see _answer); a lost answer is simply given again.
        with transaction(self._factory, durable=False) as db:
            start = SessionRepository.from_session(db).turn_start(message_id)
            if (
                start is None
                or start.tenant is None
                or start.trigger.turn_state != TurnState.PENDING
            ):
                return None, None, None
            message, chat_session = start.trigger, start.chat_session
            command = str(message.meta.get("command", "")) if message.kind == "command" else ""
            tenant = TenantDefaults.from_json(start.tenant.settings)
            models = model_choice(tenant, self._settings)
            request = TurnRequest(
                chat_session.id,
                message.id,
                message.anchor_seq,
                start.tenant.persona,
                tenant_id=chat_session.tenant_id,
                instructions=tenant.instructions,
                tenant=tenant,
                user_id=message.speaker_id,
                busy_mode=mode,
                model=models.pick(chat_session.model),
            )
            if message.meta.get("rate_limited"):
                metrics.TURNS.labels("rate_limited").inc()
                return (
                    self._record(
                        db, chat_session, message, notices.RATE_LIMITED, MessageKind.NOTICE
                    ),
                    None,
                    None,
                )
            if command in COMPACTION_COMMANDS:
                focus = str(message.meta.get("command_args", "")).strip()
                return None, request, focus
            if command:
                context = self._command_context(db, chat_session, message, request.model)
                text = run_command(command, replace(context, models=models))
                metrics.TURNS.labels("command").inc()
                metrics.TENANT_TURNS.labels(chat_session.tenant_id).inc()
                return (
                    self._record(db, chat_session, message, text, MessageKind.COMMAND),
                    None,
                    None,
                )
            images = (
                MediaFetchStep.pending(db, chat_session.id, up_to_anchor=message.anchor_seq)
                if self._media is not None and chat_session.has_media
                else []
            )
        # Streamed replies grow in their platform message while the model writes. Opened
        # outside the transaction: finding the bot's deliverer may read the database, which
        # on SQLite would wait for this very transaction's write lock.
        request = replace(request, on_text=self._streams.open(chat_session, message))
        self._delivery.typing(chat_session)
        if images and self._media is not None:
            self._media.fetch(chat_session.id, images)
        else:  # nothing of the session was written since: the agent starts on this read
            request = replace(request, start=start)
        return None, request, None

    def _answer(self, request: TurnRequest) -> tuple[int | None, TurnOutcome | None]:
        """Run the agent and commit its reply; (outbox id, the outcome unless gone)."""
        agent = Agent(self._services, request)
        outcome = agent.run()
        record_compaction_metrics(outcome.compactions)
        for error in outcome.errors:
            metrics.ERRORS.labels(type(error).__name__).inc()
        if outcome.end is TurnEnd.GONE:
            return None, None
        # Not waited to disk: if a crash loses it, the message is still pending and its turn
        # runs again; the durable delivery claim that follows flushes it first, so a reply is
        # never sent for a turn the database forgot.
        with transaction(self._factory, durable=False) as db:
            # The rows the turn started on (no read), else message and session in one query.
            found = agent.reply_rows(db)
            assert found is not None
            stored = agent.finish(db, found[0], outcome, found[1])
            outcome = stored.stopped or outcome
            stopped = outcome.interrupted
            if stopped is not None and stopped.stop and stored.closed:
                stored = replace(stored, outbox_id=self._confirm_stop(db, found[1], stopped.by))
        self._count(request, outcome)
        if isinstance(request.on_text, DraftStreamer):
            request.on_text.before_final()
        if stored.compact_later and self.dispatcher is not None:
            self.dispatcher.kick_compaction(request.session_id)
        return stored.outbox_id, outcome

    def _confirm_stop(self, db: Session, chat_session: ChatSession, stop_id: int) -> int | None:
        """Answer the ``/stop`` that stopped a turn, in the transaction that closes that turn.

        Answered here, ahead of any message waiting between the two, so the person who
        asked sees at once that the reply was stopped.
        """
        message = db.get(Message, stop_id)
        if message is None:
            return None
        metrics.TURNS.labels("command").inc()
        return self._record(db, chat_session, message, STOPPED_REPLY, MessageKind.COMMAND)

    @staticmethod
    def _count(request: TurnRequest, outcome: TurnOutcome) -> None:
        metrics.TENANT_TURNS.labels(request.tenant_id).inc()
        if outcome.end is TurnEnd.BUDGET:
            metrics.TENANT_REFUSALS.labels(request.tenant_id).inc()
        if outcome.end is TurnEnd.NO_MODEL:
            metrics.TURNS.labels("config_error").inc()
            metrics.ERRORS.labels("no_model").inc()
            return
        metrics.TURNS.labels(outcome.end).inc()
        for call in outcome.calls:
            metrics.LLM_SECONDS.observe(call.seconds)
            if call.usage is not None:
                metrics.LLM_TOKENS.labels("prompt").inc(call.usage.prompt_tokens)
                metrics.LLM_TOKENS.labels("completion").inc(call.usage.completion_tokens)

    def _record(
        self,
        db: Session,
        chat_session: ChatSession,
        message: Message,
        text: str,
        kind: MessageKind,
    ) -> int | None:
        return record_reply(
            db, chat_session, message, text, counter=self._services.counter, kind=kind
        )

    # -- commands ---------------------------------------------------------------------

    def _main_model(self, name: str | None) -> ChatModel | None:
        try:
            return self._services.models.main(name)
        except ConfigError:
            return None

    def _command_context(
        self, db: Session, chat_session: ChatSession, message: Message, model_name: str | None
    ) -> CommandContext:
        model = self._main_model(model_name)
        gauge = None
        if model is not None:
            compactor = self._services.compactor
            engine = compactor.engine(
                model,
                engine_state(chat_session),
                settings=compactor.settings_for(db, chat_session.tenant_id),
            )
            gauge = ContextGauge.of(engine, chat_session, self._services.counter)
        return CommandContext(
            db=db,
            chat_session=chat_session,
            message=message,
            args=str(message.meta.get("command_args", "")),
            gauge=gauge,
            budgets=self._services.usage.budgets if self._services.usage else None,
        )

    def _compress_command(self, request: TurnRequest, focus: str) -> int | None:
        """``/compress [focus]``: compact now (no cooldown), report what happened.

        A ``/stop`` sent meanwhile ends it before its next summary call: nothing is
        stored, the ``/compress`` is closed like a stopped turn and the ``/stop`` answered.
        """
        # A message's anchor is its own arrival number: the /stop must come after it.
        look = StopLook(self._factory, request.session_id, after_seq=request.anchor_seq)
        report = self._services.compactor.run(
            request.session_id,
            Trigger.MANUAL,
            user_id=request.user_id,
            up_to_anchor=request.anchor_seq,
            focus_topic=focus or None,
            wait_seconds=self._services.compression.lease_seconds,
            should_stop=look,
        )
        record_compaction_metrics([report])
        with transaction(self._factory, durable=False) as db:
            repo = SessionRepository.from_session(db)
            chat_session = repo.get(request.session_id)
            message = db.get(Message, request.message_id)
            assert chat_session is not None
            assert message is not None
            metrics.TENANT_TURNS.labels(chat_session.tenant_id).inc()
            if report.status is RunStatus.STOPPED and look.stop_id is not None:
                metrics.TURNS.labels(TurnEnd.INTERRUPTED).inc()
                if repo.close_unanswered(message.id, {busy.INTERRUPTED_BY: look.stop_id}):
                    return self._confirm_stop(db, chat_session, look.stop_id)
                return None
            metrics.TURNS.labels("command").inc()
            text = notices.manual_compaction(report)
            return self._record(db, chat_session, message, text, MessageKind.COMMAND)
