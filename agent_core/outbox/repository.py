"""All SQL for the outbox: claiming replies for delivery and recording how it went.

A reply is claimed with one conditional UPDATE (``pending`` -> ``sending``), so two
deliverers that race for it cannot both send it. What an attempt learned is recorded with
it: the chunks the platform is known to have (a later attempt starts after them), and
whether the last request may have reached the platform anyway (``unsettled_since``: the
next attempt must settle that before it sends). A failure is recorded only by the attempt
that holds the claim; "sent" is the truth and is recorded whoever learns it.

A streamed reply's draft messages are recorded in ``reply_streams`` (one row per turn)
before the reply itself is stored: "posting" before each new one is sent, its id right
after, so no draft message is ever posted twice or forgotten.

A claim that outlives ``claimed_until`` (the deliverer died) goes back to ``pending`` as
unsettled: the deliverer that takes it next settles it where its platform allows
(Discord's nonce, Slack's channel history) and otherwise marks it ``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import Message, OutboxEntry, OutboxState, ReplyStream
from agent_core.db.tables import OUTBOX, param
from agent_core.tracing import TRACEPARENT

MAX_ERROR_CHARS = 500
INTERRUPTED = "the deliverer stopped mid-send; the outcome is unknown until it is settled"


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
    """Including this one: the attempt that holds the claim."""
    claimed_at: datetime
    delivered_chunks: int
    platform_message_ids: list[str]
    """Of the delivered chunks."""
    unsettled_since: datetime | None
    trigger_message_id: int
    reply_message_id: int | None
    """The stored line of the reply."""


@dataclass(frozen=True, slots=True)
class StreamedMessages:
    """The draft messages a reply was streamed into."""

    message_ids: list[str]
    """The platform's ids, in reply order: the final delivery edits these."""
    unsettled: bool
    """A further draft message may have been posted without its id being recorded."""


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """What one attempt leaves behind when it did not deliver the whole reply."""

    error: str
    delivered_chunks: int
    platform_message_ids: list[str]
    unsettled_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class InterruptedReply:
    """A reply whose deliverer died mid-send, now waiting to be settled."""

    id: int
    platform: str


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
        claimed_at=param("now", OUTBOX.c.claimed_at),
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
        unsettled_since=None,
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

    def list_by_state(self, state: str, *, limit: int = 50) -> list[OutboxEntry]:
        """Entries in ``state``, newest first (what an operator looks at)."""
        return list(
            self.session.scalars(
                select(OutboxEntry)
                .where(OutboxEntry.state == state)
                .order_by(OutboxEntry.id.desc())
                .limit(limit)
            )
        )

    def trace_origin(self, outbox_id: int) -> str | None:
        """The traceparent stored with the message a reply answers (its turn's trace)."""
        meta = self.session.execute(
            select(Message.meta)
            .join(OutboxEntry, OutboxEntry.trigger_message_id == Message.id)
            .where(OutboxEntry.id == outbox_id)
        ).scalar_one_or_none()
        found = (meta or {}).get(TRACEPARENT)
        return found if isinstance(found, str) else None

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
        """The platform has the whole reply.

        Recorded whatever the entry's state: an attempt that outlived its claim (its record
        waited for the database) still knows the truth better than a later one.
        """
        self.session.execute(
            _MARK_SENT,
            {"oid": outbox_id, "ids": platform_message_ids, "now": utcnow()},
        )

    def mark_retry(
        self, claim: ClaimedReply, record: DeliveryRecord, *, delay_seconds: float
    ) -> bool:
        """Not all delivered, but a later attempt may finish it safely.

        Returns ``False`` when the attempt no longer holds the claim (nothing changed).
        """
        return self._release(
            claim,
            record,
            state=OutboxState.PENDING,
            next_attempt_at=utcnow() + timedelta(seconds=delay_seconds),
        )

    def mark_failed(self, claim: ClaimedReply, record: DeliveryRecord) -> bool:
        """Will not be tried again, and the platform does not have the rest of it."""
        return self._release(claim, record, state=OutboxState.FAILED)

    def mark_unknown(self, claim: ClaimedReply, record: DeliveryRecord) -> bool:
        """Will not be tried again, and the platform may or may not have the next chunk."""
        return self._release(claim, record, state=OutboxState.UNKNOWN)

    def _release(self, claim: ClaimedReply, record: DeliveryRecord, **values: Any) -> bool:
        result = self.session.execute(
            update(OUTBOX)
            .where(
                OUTBOX.c.id == claim.id,
                OUTBOX.c.state == OutboxState.SENDING,
                OUTBOX.c.attempts == claim.attempts,
            )
            .values(
                claimed_until=None,
                last_error=record.error[:MAX_ERROR_CHARS],
                delivered_chunks=record.delivered_chunks,
                platform_message_ids=record.platform_message_ids,
                unsettled_since=record.unsettled_since,
                **values,
            )
        )
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    def streamed(self, trigger_message_id: int) -> StreamedMessages | None:
        """The draft messages of the reply to this message, if it was streamed."""
        row = self.session.get(ReplyStream, trigger_message_id)
        if row is None:
            return None
        return StreamedMessages(list(row.message_ids), row.unsettled_since is not None)

    def stream_posting(self, trigger_message_id: int, bot_id: int) -> StreamedMessages:
        """A draft message is about to be posted: recorded before it leaves.

        Returns what was recorded before; when that is unsettled, nothing may be posted.
        """
        row = self.session.get(ReplyStream, trigger_message_id, with_for_update=True)
        if row is None:
            row = ReplyStream(trigger_message_id=trigger_message_id, bot_id=bot_id, message_ids=[])
            self.session.add(row)
            before = StreamedMessages([], unsettled=False)
        else:
            before = StreamedMessages(list(row.message_ids), row.unsettled_since is not None)
        if not before.unsettled:
            row.unsettled_since = utcnow()
        return before

    def stream_replacing(self, trigger_message_id: int, part: int) -> None:
        """A new message is about to replace draft ``part`` (deleted on the platform).

        The drafts from ``part`` on leave the record, and it stays unsettled until
        :meth:`stream_posted` names the new message (or says it was not posted).
        """
        row = self.session.get(ReplyStream, trigger_message_id, with_for_update=True)
        if row is None:
            return
        row.message_ids = list(row.message_ids[:part])
        row.unsettled_since = utcnow()

    def stream_posted(self, trigger_message_id: int, message_id: str | None) -> None:
        """The draft being posted is settled: posted as ``message_id``, or (``None``) not."""
        row = self.session.get(ReplyStream, trigger_message_id, with_for_update=True)
        if row is None:
            return
        if message_id is not None:
            row.message_ids = [*row.message_ids, message_id]
        row.unsettled_since = None

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

    def requeue_stale_claims(self, *, now: datetime) -> list[InterruptedReply]:
        """Put replies whose deliverer died mid-send back in line, as unsettled.

        The dead attempt may have reached the platform at any time since its claim began,
        so that is when they are unsettled since (an older unsettled time is kept).
        """
        rows = self.session.execute(
            update(OUTBOX)
            .where(OUTBOX.c.state == OutboxState.SENDING, OUTBOX.c.claimed_until < now)
            .values(
                state=OutboxState.PENDING,
                unsettled_since=func.coalesce(
                    OUTBOX.c.unsettled_since, OUTBOX.c.claimed_at, OUTBOX.c.created_at
                ),
                claimed_until=None,
                next_attempt_at=None,
                last_error=INTERRUPTED,
            )
            .returning(OUTBOX.c.id, OUTBOX.c.platform)
        ).all()
        return [InterruptedReply(int(row.id), str(row.platform)) for row in rows]
