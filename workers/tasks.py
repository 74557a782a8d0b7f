"""Celery tasks: thin wrappers over the turn pipeline, plus the worker's lifecycle hooks."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import signals

from agent_core.compaction.triggers import Trigger
from agent_core.logs import configure_logging
from agent_core.tracing import TRACEPARENT
from workers import metrics
from workers.app import app
from workers.broker import COMPACT_TASK, DELIVER_TASK, DRAIN_TASK, CeleryDispatcher
from workers.runtime import Runtime
from workers.sweeper import sweep_until

log = logging.getLogger(__name__)

_runtime: Runtime | None = None
_runtime_lock = threading.Lock()
_sweeper_stop = threading.Event()


def runtime() -> Runtime:
    """This worker process's runtime, built on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            from agent_core.config import load_settings

            _runtime = Runtime(load_settings(), lambda _rt: CeleryDispatcher(app))
        return _runtime


@app.task(name=DRAIN_TASK)
def drain_session(session_id: str) -> int:
    """Answer a session's waiting messages in order."""
    return runtime().turns.drain(session_id)


@app.task(name=DELIVER_TASK)
def deliver_reply(outbox_id: int) -> bool:
    """Deliver one queued reply if it is due."""
    return runtime().delivery.deliver(outbox_id)


@app.task(name=COMPACT_TASK)
def compact_session(session_id: str, trigger: str = Trigger.BACKGROUND) -> str:
    """Compact a session off the reply path (busy or quiet group threads between turns)."""
    link = getattr(compact_session.request, TRACEPARENT, None)
    return runtime().turns.compact(session_id, Trigger(trigger), link=link).outcome


def _sweep_loop() -> None:
    rt = runtime()
    interval = rt.settings.sweep_interval_seconds
    sweep_until(_sweeper_stop, interval, rt.factory, rt.dispatcher, rt.delivery, idle=rt.idle)


@signals.setup_logging.connect
def _setup_logging(**_: Any) -> None:
    # Connecting here stops Celery from installing its own handlers: one log format for all.
    settings = runtime().settings
    configure_logging(settings.log_level, json_lines=settings.log_json)


@signals.worker_ready.connect
def _on_ready(**_: Any) -> None:
    # The sweeper first: it is the safety net for lost doorbells, whatever fails below (a
    # failing signal handler is only logged by Celery, and the worker runs on without it).
    threading.Thread(target=_sweep_loop, name="hubbub-sweep", daemon=True).start()
    rt = runtime()
    if rt.settings.worker_metrics_port:
        metrics.serve(rt.settings.worker_metrics_port, rt.settings.host)
    log.info("worker ready", extra={"concurrency": rt.settings.worker_concurrency})


@signals.worker_shutting_down.connect
def _on_shutdown(**_: Any) -> None:
    # Running turns finish; drains stop taking new messages and hand the session back.
    _sweeper_stop.set()
    if _runtime is not None:
        _runtime.stopping.set()
