"""Run a session's compaction under its lease: load, decide, compress (no transaction open), apply.

Every path that compacts goes through :class:`Compactor`: the agent loop's hygiene,
preflight, post-response and overflow triggers, ``/compress``, and the background and idle
compactions between turns. Only the holder of the session's compaction lease compacts;
anyone else leaves the transcript as it is and lets the holder finish. Under the lease the
session is read again and the trigger's rule (:func:`~agent_core.compaction.triggers.due`)
judges that fresh read, because another worker may have compacted meanwhile.

Lock errors fail closed: if the lease cannot be read or taken (the database is failing),
no compaction runs and the turn goes on with the transcript as stored.

The summary calls count against budgets like a turn's: before compressing, the estimate
(the transcript's size) is checked and reserved for the compaction, and its calls are
charged as they return. A compaction that would pass a budget is skipped
(:attr:`RunStatus.OVER_BUDGET`) rather than spending; ``/compress`` answers the refusal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from agent_core import tracing
from agent_core.compaction.service import (
    Measurements,
    apply_compaction,
    engine_state,
    store_engine_state,
    token_calibration,
)
from agent_core.compaction.triggers import Lines, SessionSize, Trigger, due
from agent_core.config import CompressionSettings
from agent_core.context import (
    CompressionOutcome,
    CompressionResult,
    ContextEngine,
    EngineState,
    create_engine,
    preflight,
)
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import ChatSession, Tenant
from agent_core.errors import ConfigError
from agent_core.llm.model import CallStopped, ChatModel
from agent_core.llm.models import ModelSet
from agent_core.llm.wrapper import Meter, MeteredModel, StoppableModel
from agent_core.prompt.assembler import PromptAssembler
from agent_core.sessions import lock
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.view import SessionView, load_view
from agent_core.tenancy.settings import TenantDefaults, compression_for
from agent_core.tokens import TokenCounter, rough_tokens
from agent_core.usage import (
    Budgets,
    LedgerModel,
    Purpose,
    UsageLedger,
    UsageScope,
    compaction_keys,
)

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.2


class RunStatus(StrEnum):
    """How far a compaction attempt got."""

    RAN = "ran"
    """The engine ran; the report's result says what it did (applied or not)."""
    BUSY = "busy"
    """Another worker holds the session's compaction lease."""
    LOCK_ERROR = "lock_error"
    """The lease could not be read or taken (the database is failing)."""
    NO_MODEL = "no_model"
    NOT_NEEDED = "not_needed"
    """The trigger's rule said no on the fresh read."""
    SUPERSEDED = "superseded"
    """Another compaction committed while this one ran (its lease had expired); discarded."""
    OVER_BUDGET = "over_budget"
    """Its summary calls would pass a budget: skipped, nothing spent."""
    STOPPED = "stopped"
    """Whoever asked said to stop (``/stop``) before it ended: nothing changed."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What a compaction attempt did."""

    trigger: Trigger
    status: RunStatus
    result: CompressionResult | None = None
    compaction_id: int | None = None
    cpu_ms: float | None = None
    """The compressor's own CPU, model calls excluded."""
    tenant_id: str | None = None
    """Whose budget refused it (:attr:`RunStatus.OVER_BUDGET` only)."""
    refusal: str | None = None
    """What to tell the person who asked (:attr:`RunStatus.OVER_BUDGET` only)."""

    @property
    def applied(self) -> bool:
        """Whether the stored transcript changed."""
        return self.compaction_id is not None

    @property
    def aborted(self) -> bool:
        """Whether the summary call failed in a way that must not drop anything."""
        return self.result is not None and self.result.outcome is CompressionOutcome.ABORTED

    @property
    def outcome(self) -> str:
        """One word for logs and metrics: the engine's outcome, or how far the attempt got."""
        return self.result.outcome if self.result is not None else self.status


def _report_attributes(report: CompactionReport) -> dict[str, str | int | bool]:
    """What a compaction span says about the attempt: outcome, strategy, tokens."""
    attributes: dict[str, str | int | bool] = {
        "hubbub.outcome": str(report.outcome),
        "hubbub.applied": report.applied,
    }
    if report.result is not None:
        attributes.update(
            {
                "hubbub.strategy": str(report.result.strategy),
                "hubbub.tokens_before": report.result.tokens_before,
                "hubbub.tokens_after": report.result.tokens_after,
                "hubbub.fallback_used": report.result.fallback_used,
            }
        )
    return attributes


def exact_size(
    view: SessionView, counter: TokenCounter, *, overhead_tokens: int = 0
) -> SessionSize:
    """The size of the next request from a session view: stored counts plus the prompt.

    ``overhead_tokens`` is what the request adds beyond messages (tool schemas).
    """
    prompt = counter.count_text(view.system_prompt or "") if view.system_prompt else 0
    return SessionSize(
        counted_tokens=view.transcript.tokens + prompt + overhead_tokens,
        messages=len(view.transcript.messages),
        calibration=view.calibration,
    )


def row_size(chat_session: ChatSession) -> SessionSize:
    """A cheap size from the session row alone (running totals, rough summary and prompt).

    Between turns, background and idle checks look at this before reading a transcript.
    """
    counted = chat_session.active_tokens + rough_tokens(chat_session.summary or "")
    counted += rough_tokens(chat_session.system_prompt or "")
    return SessionSize(
        counted_tokens=counted,
        messages=chat_session.active_count,
        calibration=token_calibration(chat_session),
    )


class Compactor:
    """Compacts sessions; one per process, shared by its threads.

    Args:
        settings: the deployment's compression settings (a tenant's thresholds move them
            for its sessions: :meth:`settings_for`).
        factory: opens units of work.
        counter: counts summaries and rewritten messages.
        models: the main and summary models.
        prompts: rebuilds a session's system prompt after a compaction (fresh memory).
        ledger: where the summary calls are charged (``None``: nowhere).
        budgets: checked before the summary calls (``None``: none).
    """

    def __init__(
        self,
        settings: CompressionSettings,
        factory: sessionmaker[Session],
        counter: TokenCounter,
        models: ModelSet,
        prompts: PromptAssembler,
        ledger: UsageLedger | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.budgets = budgets
        self._factory = factory
        self._counter = counter
        self._models = models
        self._prompts = prompts

    def settings_for(self, db: Session, tenant_id: str) -> CompressionSettings:
        """The compression settings of a tenant's sessions (its thresholds over ours)."""
        tenant = db.get(Tenant, tenant_id)
        return self.tenant_settings(TenantDefaults.from_json(tenant.settings if tenant else None))

    def tenant_settings(self, tenant: TenantDefaults) -> CompressionSettings:
        """The compression settings under a tenant's stored settings."""
        return compression_for(self.settings, tenant)

    def lines(self, settings: CompressionSettings, model_name: str | None = None) -> Lines | None:
        """The compaction lines of ``model_name`` (default: the main model) under ``settings``.

        ``None`` when compaction is off or no model is configured.
        """
        if not settings.enabled:
            return None
        try:
            model = self._models.main(model_name)
        except ConfigError:
            return None
        return Lines.compute(settings, model.context_length, model.max_output_tokens)

    def engine(
        self,
        model: ChatModel,
        state: EngineState,
        *,
        settings: CompressionSettings,
        summary_model: ChatModel | None = None,
    ) -> ContextEngine:
        """The configured context engine for one session state under ``settings``.

        ``settings`` are the session's (:meth:`settings_for` its tenant), so every rule and
        gauge judges a session by its own tenant's lines.
        """
        return create_engine(
            settings.engine,
            settings,
            model=model,
            summary_model=summary_model or self._models.summary(),
            state=state,
        )

    def run(
        self,
        session_id: str,
        trigger: Trigger,
        *,
        user_id: str | None = None,
        up_to_anchor: int | None = None,
        focus_topic: str | None = None,
        wait_seconds: float = 0.0,
        tools: Sequence[Mapping[str, Any]] | None = None,
        overhead_tokens: int = 0,
        link: str | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> CompactionReport:
        """Compact the session if the trigger's rule says so, holding its lease.

        Args:
            session_id: the session.
            trigger: which rule decides (see :func:`~agent_core.compaction.triggers.due`).
            user_id: the person whose turn asked for it: its summary calls are charged to
                them too (``None`` between turns: the tenant and chat only).
            up_to_anchor: compact only what a turn sees (messages at or before its own).
            focus_topic: what the summary should keep in most detail.
            wait_seconds: how long to wait for a busy lease (overflow recovery and
                ``/compress`` wait for the holder's result instead of failing).
            tools: the tool schemas the next request sends (preflight estimates them).
            overhead_tokens: our count of what the next request adds beyond its messages
                (those tool schemas).
            link: the traceparent of what asked for it from elsewhere (a turn, a message's
                intake), when traced.
            should_stop: asked before each summary call; once it says so, no more calls
                are made and nothing is stored (:attr:`RunStatus.STOPPED`).

        With tracing on, each attempt is the root span of a trace of its own, linked to the
        turn it runs in (the current span) and to ``link``.
        """
        # Tracing off, the span is a shared no-op and its attributes cost a small dict.
        with tracing.span(
            "hubbub.compaction", root=True, links=(tracing.traceparent(), link)
        ) as span:
            span.set_attributes({"hubbub.session_id": session_id, "hubbub.trigger": str(trigger)})
            report = self._run(
                session_id,
                trigger,
                user_id,
                up_to_anchor,
                focus_topic,
                wait_seconds,
                tools,
                overhead_tokens,
                should_stop,
            )
            span.set_attributes(_report_attributes(report))
            return report

    def _run(
        self,
        session_id: str,
        trigger: Trigger,
        user_id: str | None,
        up_to_anchor: int | None,
        focus_topic: str | None,
        wait_seconds: float,
        tools: Sequence[Mapping[str, Any]] | None,
        overhead_tokens: int,
        should_stop: Callable[[], bool] | None,
    ) -> CompactionReport:
        owner = lock.owner_identity()
        lease = self.settings.lease_seconds
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                taken = lock.acquire(self._factory, session_id, lock.COMPACTION, owner, lease)
            except SQLAlchemyError:
                log.warning("compaction lock unavailable", extra={"session_id": session_id})
                return CompactionReport(trigger, RunStatus.LOCK_ERROR)
            if taken:
                break
            if time.monotonic() >= deadline:
                return CompactionReport(trigger, RunStatus.BUSY)
            time.sleep(LOCK_POLL_SECONDS)
        try:
            with lock.LeaseKeeper(self._factory, session_id, lock.COMPACTION, owner, lease):
                report = self._run_locked(
                    session_id,
                    trigger,
                    user_id,
                    up_to_anchor,
                    focus_topic,
                    tools,
                    overhead_tokens,
                    should_stop,
                )
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
        user_id: str | None,
        up_to_anchor: int | None,
        focus_topic: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
        overhead_tokens: int,
        should_stop: Callable[[], bool] | None,
    ) -> CompactionReport:
        try:
            main = self._models.main()
        except ConfigError:
            return CompactionReport(trigger, RunStatus.NO_MODEL)
        with transaction(self._factory, durable=False) as db:
            main = self._session_model(db, session_id, main)
            if trigger in (Trigger.BACKGROUND, Trigger.IDLE) and not self._row_due(
                db, session_id, main, trigger
            ):
                return CompactionReport(trigger, RunStatus.NOT_NEEDED)
            read_at = utcnow()
            view = load_view(db, session_id, self._counter, up_to_anchor=up_to_anchor)
            chat_session = db.get(ChatSession, session_id)
            if view is None or chat_session is None:
                return CompactionReport(trigger, RunStatus.NOT_NEEDED)
            scope = UsageScope.of(chat_session, user_id)
            settings = self.settings_for(db, chat_session.tenant_id)
        meter = Meter()
        summary = self._models.summary()
        charged = self._charged(scope, view.summary_version, should_stop)
        engine = self.engine(
            charged(MeteredModel(main, meter)),
            view.state,
            settings=settings,
            summary_model=charged(MeteredModel(summary, meter)) if summary else None,
        )
        size = exact_size(view, self._counter, overhead_tokens=overhead_tokens)
        if not due(trigger, size, engine):
            return CompactionReport(trigger, RunStatus.NOT_NEEDED)
        holder = f"compaction:{session_id}:{view.summary_version}"
        model_name = (summary or main).name
        held = self._reserve(scope, holder, trigger, model_name, size.tokens)
        if isinstance(held, CompactionReport):
            return held
        cpu_started, wall_started = time.thread_time(), time.perf_counter()
        try:
            result = self._compress(engine, view, trigger, size, focus_topic, tools)
        except CallStopped:
            return CompactionReport(trigger, RunStatus.STOPPED)
        finally:
            if held:
                self._release(holder)
        measured = Measurements(
            cpu_ms=round((time.thread_time() - cpu_started - meter.cpu_seconds) * 1000, 3),
            wall_ms=round((time.perf_counter() - wall_started) * 1000, 3),
        )
        if result is None:
            return CompactionReport(trigger, RunStatus.NOT_NEEDED)
        with transaction(self._factory) as db:
            chat_session = SessionRepository.from_session(db).get(session_id, for_update=True)
            if chat_session is None or chat_session.summary_version != view.summary_version:
                return CompactionReport(trigger, RunStatus.SUPERSEDED, result)
            if not result.applied:
                store_engine_state(chat_session, engine.state)
                return CompactionReport(trigger, RunStatus.RAN, result, cpu_ms=measured.cpu_ms)
            compaction = apply_compaction(
                db,
                chat_session,
                view.transcript,
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
        return CompactionReport(trigger, RunStatus.RAN, result, compaction_id, measured.cpu_ms)

    def _reserve(
        self, scope: UsageScope, holder: str, trigger: Trigger, model: str, estimate: int
    ) -> CompactionReport | bool:
        """Hold the summary calls' estimate (whether held), or the report of the skip."""
        budgets = self.budgets
        if budgets is None:
            return False
        with read_transaction(self._factory) as db:
            if not budgets.apply_to(db, scope):
                return False
        with transaction(self._factory, durable=False) as db:
            broken = budgets.reserve(db, scope, holder, model=model, estimate_tokens=estimate)
        if broken is None:
            return True
        log.info(
            "compaction skipped: over budget",
            extra={
                "session_id": scope.session_id,
                "trigger": trigger,
                "budget_scope": broken.scope,
                "period": broken.period,
                "unit": broken.unit,
            },
        )
        return CompactionReport(
            trigger,
            RunStatus.OVER_BUDGET,
            tenant_id=scope.tenant_id,
            refusal=budgets.refusal(broken),
        )

    def _release(self, holder: str) -> None:
        """Drop the compaction's reservation: its summary calls are charged by now."""
        if self.budgets is None:
            return
        try:
            with transaction(self._factory, durable=False) as db:
                self.budgets.settle(db, holder)
        except SQLAlchemyError:
            log.warning("budget reservation not released; it will expire")

    def _charged(
        self, scope: UsageScope, summary_version: int, should_stop: Callable[[], bool] | None
    ) -> Callable[[ChatModel], ChatModel]:
        """Wraps the compaction's models: calls charged under shared keys, none after a stop."""
        ledger = self.ledger
        keys = compaction_keys(scope.session_id or "", summary_version)

        def wrap(model: ChatModel) -> ChatModel:
            if ledger is not None:
                model = LedgerModel(model, ledger, scope, Purpose.SUMMARY, keys)
            return model if should_stop is None else StoppableModel(model, should_stop)

        return wrap

    def _session_model(self, db: Session, session_id: str, default: ChatModel) -> ChatModel:
        """The model the session's turns use (``/model``), whose window its compactions fit."""
        chat_session = db.get(ChatSession, session_id)
        if chat_session is None or chat_session.model is None:
            return default
        tenant = db.get(Tenant, chat_session.tenant_id)
        choice = self._models.choice(TenantDefaults.from_json(tenant.settings if tenant else None))
        return self._models.main(choice.pick(chat_session.model))

    def _row_due(self, db: Session, session_id: str, model: ChatModel, trigger: Trigger) -> bool:
        """The trigger's rule on the session row, before reading its whole transcript.

        Busy groups ring for background compaction again and again while they are over
        the line; when automatic compaction is paused (cooldown, anti-thrashing) or the
        stored totals are under the line, nothing needs loading.
        """
        chat_session = db.get(ChatSession, session_id)
        if chat_session is None:
            return False
        settings = self.settings_for(db, chat_session.tenant_id)
        engine = self.engine(model, engine_state(chat_session), settings=settings)
        return bool(due(trigger, row_size(chat_session), engine))

    @staticmethod
    def _compress(
        engine: ContextEngine,
        view: SessionView,
        trigger: Trigger,
        size: SessionSize,
        focus_topic: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> CompressionResult | None:
        messages, counts = view.transcript.messages, view.transcript.token_counts
        if trigger is Trigger.PREFLIGHT:
            return preflight(
                engine, messages, tools=tools, system_prompt=view.system_prompt, token_counts=counts
            ).compression
        # The provider or the user has decided: no cooldown, no size pre-check.
        force = trigger in (Trigger.MANUAL, Trigger.OVERFLOW)
        return engine.compress(
            messages,
            current_tokens=size.tokens,
            focus_topic=focus_topic,
            force=force,
            token_counts=counts,
        )
