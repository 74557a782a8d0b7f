"""All SQL for the outbox: claiming replies for delivery and recording how it went.

A reply is claimed with one conditional UPDATE (``pending`` -> ``sending``), so two
deliverers that race for it cannot both send it. A claim that outlives ``claimed_until``
(the deliverer died) is not retried automatically: the reply may or may not have reached
the platform, and Hubbub prefers a missing reply, which the operator sees as ``sending``
past its claim, over a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import OutboxEntry, OutboxState
from agent_core.db.tables import OUTBOX, param

MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class ClaimedReply:
    """A reply this deliverer now owns: everything sending it needs."""

    id: int
    bot_id: int
    platform: str
    chat_id: str
    thread_id: str
    text: str
    reply_to_platform_id: str | None
    meta: dict[str, Any]
    attempts: int


_CLAIM = (
    update(OUTBOX)
    .where(
        OUTBOX.c.id == param("oid", OUTBOX.c.id),
        OUTBOX.c.state == OutboxState.PENDING,
        or_(
            OUTBOX.c.next_attempt_at.is_(None),
            OUTBOX.c.next_attempt_at <= param("now", OUTBOX.c.next_attempt_at),
        ),
    )
    .values(
        state=OutboxState.SENDING,
        attempts=OUTBOX.c.attempts + 1,
        claimed_until=param("until", OUTBOX.c.claimed_until),
    )
    .returning(*(OUTBOX.c[field.name] for field in fields(ClaimedReply)))
)
_MARK_SENT = (
    update(OUTBOX)
    .where(OUTBOX.c.id == param("oid", OUTBOX.c.id))
    .values(
        state=OutboxState.SENT,
        platform_message_ids=param("ids", OUTBOX.c.platform_message_ids),
        sent_at=param("now", OUTBOX.c.sent_at),
        claimed_until=None,
        last_error=None,
    )
)
"""Every reply runs these; built once (see ``agent_core.db.tables``)."""


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

    def claim(self, outbox_id: int, *, claim_seconds: float) -> ClaimedReply | None:
        """Move a due entry to ``sending`` and return what sending it needs.

        ``None`` when someone else has it, it is not due, or it is done.
        """
        now = utcnow()
        row = self.session.execute(
            _CLAIM, {"oid": outbox_id, "now": now, "until": now + timedelta(seconds=claim_seconds)}
        ).one_or_none()
        return ClaimedReply(*row) if row is not None else None

    def mark_sent(self, outbox_id: int, platform_message_ids: list[str]) -> None:
        """The platform accepted the reply."""
        self.session.execute(
            _MARK_SENT, {"oid": outbox_id, "ids": platform_message_ids, "now": utcnow()}
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
