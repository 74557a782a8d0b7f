"""All SQL for the outbox: claiming replies for delivery and recording how it went.

A reply is claimed with one conditional UPDATE (``pending`` -> ``sending``), so two
deliverers that race for it cannot both send it. A claim that outlives ``claimed_until``
(the deliverer died) is not retried automatically: the reply may or may not have reached
the platform, and Hubbub prefers a missing reply, which the operator sees as ``sending``
past its claim, over a duplicate.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import OutboxEntry, OutboxState

MAX_ERROR_CHARS = 500


class OutboxRepository:
    """Delivery state transitions; never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> OutboxRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def get(self, outbox_id: int) -> OutboxEntry | None:
        """The entry, or ``None``."""
        return self.session.get(OutboxEntry, outbox_id)

    def get_by_trigger(self, trigger_message_id: int) -> OutboxEntry | None:
        """The reply queued for a message, if any."""
        return self.session.scalar(
            select(OutboxEntry).where(OutboxEntry.trigger_message_id == trigger_message_id)
        )

    def claim(self, outbox_id: int, *, claim_seconds: float) -> OutboxEntry | None:
        """Move a due entry to ``sending`` and return it.

        ``None`` when someone else has it, it is not due, or it is done.
        """
        now = utcnow()
        return self.session.scalars(
            update(OutboxEntry)
            .where(
                OutboxEntry.id == outbox_id,
                OutboxEntry.state == OutboxState.PENDING,
                or_(OutboxEntry.next_attempt_at.is_(None), OutboxEntry.next_attempt_at <= now),
            )
            .values(
                state=OutboxState.SENDING,
                attempts=OutboxEntry.attempts + 1,
                claimed_until=now + timedelta(seconds=claim_seconds),
            )
            .returning(OutboxEntry)
            .execution_options(synchronize_session=False)
        ).one_or_none()

    def mark_sent(self, outbox_id: int, platform_message_ids: list[str]) -> None:
        """The platform accepted the reply."""
        self.session.execute(
            update(OutboxEntry)
            .where(OutboxEntry.id == outbox_id)
            .values(
                state=OutboxState.SENT,
                platform_message_ids=platform_message_ids,
                sent_at=utcnow(),
                claimed_until=None,
                last_error=None,
            )
            .execution_options(synchronize_session=False)
        )

    def mark_retry(self, entry: OutboxEntry, error: str, *, delay_seconds: float) -> None:
        """Delivery failed but may work later."""
        entry.state = OutboxState.PENDING
        entry.next_attempt_at = utcnow() + timedelta(seconds=delay_seconds)
        entry.claimed_until = None
        entry.last_error = error[:MAX_ERROR_CHARS]
        self.session.flush()

    def mark_failed(self, entry: OutboxEntry, error: str) -> None:
        """Delivery will not be tried again."""
        entry.state = OutboxState.FAILED
        entry.claimed_until = None
        entry.last_error = error[:MAX_ERROR_CHARS]
        self.session.flush()

    def due(self, *, now: datetime, created_before: datetime, limit: int = 100) -> list[int]:
        """Pending entries whose next attempt is due, oldest first."""
        rows = self.session.scalars(
            select(OutboxEntry.id)
            .where(
                OutboxEntry.state == OutboxState.PENDING,
                OutboxEntry.created_at < created_before,
                or_(OutboxEntry.next_attempt_at.is_(None), OutboxEntry.next_attempt_at <= now),
            )
            .order_by(OutboxEntry.id)
            .limit(limit)
        )
        return list(rows)

    def expire_stale_claims(self, *, now: datetime) -> int:
        """Fail replies whose deliverer died mid-send: their outcome is unknown.

        They are not re-sent, because the platform may have received them; a duplicate
        reply is worse than a visible failure the operator can act on.
        """
        result = self.session.execute(
            update(OutboxEntry)
            .where(OutboxEntry.state == OutboxState.SENDING, OutboxEntry.claimed_until < now)
            .values(
                state=OutboxState.FAILED,
                last_error="delivery outcome unknown: the deliverer stopped mid-send",
                claimed_until=None,
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
