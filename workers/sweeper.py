"""The safety net: find work whose doorbell was lost and ring again.

Runs periodically in every worker (and in the embedded runner). Ringing twice is
harmless: drains are serialised by the session lease and deliveries by their claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.base import utcnow
from agent_core.db.engine import transaction
from agent_core.outbox.repository import OutboxRepository
from agent_core.sessions.repository import SessionRepository
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tenancy.settings import TenantDefaults
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher

log = logging.getLogger(__name__)

GRACE_SECONDS = 2.0
"""Work younger than this is left to its own doorbell."""


@dataclass(frozen=True, slots=True)
class IdleCompaction:
    """When a quiet session is compacted down, so the next question finds it small.

    A busy group is compacted whenever it crosses its background line, which leaves it
    anywhere below that line when the chatter stops. Once it has been quiet for
    ``seconds``, a session that still holds ``min_tokens`` or more (and grew since its
    last compaction) is compacted off the reply path.
    """

    seconds: float
    min_tokens: int
    """The deployment's idle line."""
    line: Callable[[TenantDefaults], int] | None = None
    """A tenant's idle line under its own compression thresholds (``None``: ours for all)."""

    def tenant_lines(self, db: Session) -> dict[str, int]:
        """The idle lines of the tenants whose thresholds move ours."""
        if self.line is None:
            return {}
        found = TenancyRepository.from_session(db).tenant_settings()
        lines = {tenant_id: self.line(TenantDefaults.from_json(raw)) for tenant_id, raw in found}
        return {tenant_id: line for tenant_id, line in lines.items() if line != self.min_tokens}


def sweep(
    factory: sessionmaker[Session],
    dispatcher: Dispatcher,
    delivery: DeliveryService,
    *,
    idle: IdleCompaction | None = None,
) -> tuple[int, int]:
    """Ring for stranded sessions, due replies and quiet sessions worth compacting.

    Returns how many sessions and replies it rang for.
    """
    now = utcnow()
    grace = now - timedelta(seconds=GRACE_SECONDS)
    quiet: list[str] = []
    with transaction(factory) as db:
        repo = SessionRepository.from_session(db)
        sessions = repo.sessions_needing_turns(now=now, created_before=grace)
        replies = OutboxRepository.from_session(db).due(now=now, created_before=grace)
        if idle is not None:
            quiet = repo.idle_sessions(
                quiet_since=now - timedelta(seconds=idle.seconds),
                min_tokens=idle.min_tokens,
                tenant_min_tokens=idle.tenant_lines(db),
            )
    for session_id in sessions:
        dispatcher.kick_session(session_id)
    for outbox_id in replies:
        dispatcher.kick_delivery(outbox_id)
    for session_id in quiet:
        dispatcher.kick_compaction(session_id, "idle")
    interrupted = delivery.requeue_stale_claims()
    if sessions or replies or interrupted:
        log.info(
            "sweep",
            extra={"sessions": len(sessions), "replies": len(replies), "interrupted": interrupted},
        )
    return len(sessions), len(replies)


def sweep_until(
    stop: threading.Event,
    interval: float,
    factory: sessionmaker[Session],
    dispatcher: Dispatcher,
    delivery: DeliveryService,
    *,
    idle: IdleCompaction | None = None,
) -> None:
    """Sweep now and then every ``interval`` seconds until ``stop`` is set.

    A failed sweep (the database or the broker is down) is retried at the next interval;
    the first failure of a run is logged with its traceback, the recovery once.
    """
    failing = False
    while True:
        try:
            sweep(factory, dispatcher, delivery, idle=idle)
        except Exception:
            if not failing:
                log.exception("sweep failed, retrying", extra={"interval_seconds": interval})
            failing = True
        else:
            if failing:
                log.info("sweep recovered")
            failing = False
        if stop.wait(interval):
            return
