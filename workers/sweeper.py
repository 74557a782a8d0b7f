"""The safety net: find work whose doorbell was lost and ring again.

Runs periodically in every worker (and in the embedded runner). Ringing twice is
harmless: drains are serialised by the session lease and deliveries by their claim.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.base import utcnow
from agent_core.db.engine import transaction
from agent_core.outbox.repository import OutboxRepository
from agent_core.sessions.repository import SessionRepository
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher

log = logging.getLogger(__name__)

GRACE_SECONDS = 2.0
"""Work younger than this is left to its own doorbell."""


def sweep(
    factory: sessionmaker[Session], dispatcher: Dispatcher, delivery: DeliveryService
) -> tuple[int, int]:
    """Ring for stranded sessions and due replies; returns how many of each."""
    now = utcnow()
    grace = now - timedelta(seconds=GRACE_SECONDS)
    with transaction(factory) as db:
        sessions = SessionRepository.from_session(db).sessions_needing_turns(
            now=now, created_before=grace
        )
        replies = OutboxRepository.from_session(db).due(now=now, created_before=grace)
    for session_id in sessions:
        dispatcher.kick_session(session_id)
    for outbox_id in replies:
        dispatcher.kick_delivery(outbox_id)
    expired = delivery.expire_stale_claims()
    if sessions or replies or expired:
        log.info(
            "sweep",
            extra={"sessions": len(sessions), "replies": len(replies), "expired_claims": expired},
        )
    return len(sessions), len(replies)
