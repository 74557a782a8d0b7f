"""Run the pipeline inside the gateway process when no broker is configured.

The same turn code as the Celery workers, on a thread pool; the database is the queue, so
a message accepted before a crash is found by the first sweep after the restart.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy import delete

from agent_core import tracing
from agent_core.compaction.triggers import Trigger
from agent_core.db.engine import transaction
from agent_core.db.models import SessionLock
from agent_core.sessions import lock
from workers.runtime import Runtime
from workers.sweeper import sweep_until

log = logging.getLogger(__name__)


class EmbeddedRunner:
    """A :class:`~workers.dispatch.Dispatcher` that runs drains and deliveries on threads."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._executor = ThreadPoolExecutor(
            max_workers=runtime.settings.worker_concurrency, thread_name_prefix="hubbub-turn"
        )
        self._queued: set[str] = set()
        self._compacting: set[str] = set()
        self._futures: set[Future[object]] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="hubbub-sweep", daemon=True)

    def start(self) -> None:
        """Forget leases of the previous run (it is dead: it was this process) and sweep."""
        with transaction(self._runtime.factory) as db:
            db.execute(delete(SessionLock).where(SessionLock.kind == lock.TURN))
        self._sweeper.start()

    def _submit(self, fn: object, *args: object) -> None:
        if self._closing.is_set():
            return
        future: Future[object] = self._executor.submit(fn, *args)  # type: ignore[arg-type]
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[object]) -> None:
        with self._lock:
            self._futures.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("background work failed", exc_info=future.exception())

    def kick_session(self, session_id: str) -> None:
        """Schedule a drain unless one is already waiting to start for this session."""
        with self._lock:
            if session_id in self._queued:
                return
            self._queued.add(session_id)
        self._submit(self._drain, session_id)

    def _drain(self, session_id: str) -> int:
        with self._lock:
            self._queued.discard(session_id)
        return self._runtime.turns.drain(session_id)

    def kick_delivery(self, outbox_id: int) -> None:
        """Schedule a delivery attempt."""
        self._submit(self._runtime.delivery.deliver, outbox_id)

    def kick_compaction(self, session_id: str, trigger: str = Trigger.BACKGROUND) -> None:
        """Schedule a compaction unless one is already waiting for this session."""
        with self._lock:
            if session_id in self._compacting:
                return
            self._compacting.add(session_id)
        # The span that asked (a turn, a message's intake), for the compaction's trace to link to.
        self._submit(self._compact, session_id, trigger, tracing.traceparent())

    def _compact(self, session_id: str, trigger: str, link: str | None) -> str:
        with self._lock:
            self._compacting.discard(session_id)
        return self._runtime.turns.compact(session_id, Trigger(trigger), link=link).outcome

    def _sweep_loop(self) -> None:
        rt = self._runtime
        sweep_until(
            self._closing,
            rt.settings.sweep_interval_seconds,
            rt.factory,
            self,
            rt.delivery,
            idle=rt.idle,
        )

    def stop(self, grace_seconds: float) -> None:
        """Answer what was accepted (up to ``grace_seconds``), then stop after running turns.

        Messages still waiting when the grace ends stay in the database and are answered
        after the next start.
        """
        self._closing.set()
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            with self._lock:
                if not self._futures:
                    break
            time.sleep(0.05)
        self._runtime.stopping.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._sweeper.is_alive():
            self._sweeper.join(timeout=5)
