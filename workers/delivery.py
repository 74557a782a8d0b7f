"""Deliver queued replies through their platform: never twice, and never lost silently.

One conditional UPDATE claims a reply before it is sent, so a task that runs twice (or two
workers that race) cannot send it twice. What the deliverer reports decides what follows:
a failure that proves nothing was sent is retried with back-off, from the first chunk not
yet delivered; a send that may have reached the platform is tried again only where the
deliverer settles it first (Discord's enforced nonce, Slack's channel history), and is
otherwise marked ``unknown`` for the operator, logged and counted. Outcomes are committed
as durably as the claim, and retried while the database is away, so a delivered reply is
not left looking undelivered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from adapters.base import Deliverer, DeliveryError, DraftEditor, DraftRecord
from adapters.messages import ChatTarget, OutboundMessage
from adapters.pacing import waiting_in_all_at_most
from adapters.registry import create_deliverer
from adapters.webchat.deliverer import WebchatDeliverer
from agent_core import tracing
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import ChatSession
from agent_core.outbox.repository import (
    ClaimedReply,
    DeliveryRecord,
    OutboxRepository,
    StreamedMessages,
)
from workers import metrics
from workers.aio import BackgroundLoop
from workers.bots import BotDirectory
from workers.streaming import EDITED_PLATFORMS, DraftFeed

log = logging.getLogger(__name__)

T = TypeVar("T")

CLAIM_SECONDS = 120.0
SEND_TIMEOUT_SECONDS = 100.0
PACING_BUDGET_SECONDS = 30.0
"""Most one delivery waits for rate-limit slots in all; with a deliverer's own budget for
waiting out 429s (at most 45 s) it stays inside ``SEND_TIMEOUT_SECONDS``, so pacing never
turns a send into a timeout (whose outcome would be unknown): past it the send fails as
retryable, unsent."""
RETRY_BASE_SECONDS = 2.0
RETRY_MAX_SECONDS = 300.0
TYPING_TIMEOUT_SECONDS = 5.0
RECORD_RETRY_SECONDS = 15.0
"""How long an outcome is retried while the database is unreachable; with the longest send
it stays inside the claim, so the sweeper never takes a reply whose outcome is on its way."""
RECORD_WAIT_MAX_SECONDS = 2.0
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
"""What a lost connection or a restarting database raises."""


def _outbound(
    claim: ClaimedReply, bot_name: str, streamed: StreamedMessages | None
) -> OutboundMessage:
    return OutboundMessage(
        platform=claim.platform,
        bot_name=bot_name,
        chat_id=claim.chat_id,
        chat_type=claim.meta.get("chat_type", "private"),
        thread_id=claim.thread_id,
        text=claim.text,
        reply_to_message_id=claim.reply_to_platform_id,
        delivery_id=str(claim.id),
        message_id=str(claim.reply_message_id) if claim.reply_message_id is not None else None,
        delivered_chunks=claim.delivered_chunks,
        delivered_ids=tuple(claim.platform_message_ids),
        unsettled_since=claim.unsettled_since,
        streamed_ids=tuple(streamed.message_ids) if streamed is not None else (),
        stream_unsettled=streamed is not None and streamed.unsettled,
    )


class RecordedDrafts(DraftRecord):
    """A streamed reply's ``reply_streams`` row, for a delivery that replaces a deleted draft.

    Each write is committed durably before the deliverer goes on (off its event loop): the
    row must say a replacement is under way before the post leaves, and name it after.
    """

    def __init__(self, factory: sessionmaker[Session], trigger_message_id: int) -> None:
        self._factory = factory
        self._trigger = trigger_message_id

    async def replacing(self, part: int) -> None:
        """The drafts from ``part`` on leave the record; a replacement is under way."""
        await asyncio.to_thread(
            self._write, lambda repo: repo.stream_replacing(self._trigger, part)
        )

    async def replaced(self, message_id: str | None) -> None:
        """The replacement is ``message_id`` (``None``: not posted); the record is settled."""
        await asyncio.to_thread(
            self._write, lambda repo: repo.stream_posted(self._trigger, message_id)
        )

    def _write(self, write: Callable[[OutboxRepository], None]) -> None:
        with transaction(self._factory) as db:
            write(OutboxRepository.from_session(db))


def _log_record_retry(state: RetryCallState) -> None:
    log.warning(
        "the database is unavailable; recording the delivery outcome again",
        extra={"attempt": state.attempt_number},
    )


class DeliveryService:
    """Owns one deliverer per bot on a shared event loop."""

    def __init__(
        self, factory: sessionmaker[Session], bots: BotDirectory, *, max_attempts: int
    ) -> None:
        self._factory = factory
        self._bots = bots
        self._max_attempts = max_attempts
        self._loop: BackgroundLoop | None = None
        self._deliverers: dict[int, Deliverer] = {}
        self._lock = threading.Lock()
        self._record_retrying = Retrying(
            retry=retry_if_exception_type(DATABASE_UNAVAILABLE),
            wait=wait_exponential(multiplier=0.1, max=RECORD_WAIT_MAX_SECONDS),
            stop=stop_after_delay(RECORD_RETRY_SECONDS),
            before_sleep=_log_record_retry,
            reraise=True,
        )

    def _deliverer(self, bot_id: int) -> tuple[Deliverer, BackgroundLoop]:
        with self._lock:
            if self._loop is None:
                self._loop = BackgroundLoop()
            loop = self._loop
            deliverer = self._deliverers.get(bot_id)
            if deliverer is None:
                deliverer = create_deliverer(self._bots.config(bot_id))
                loop.run(deliverer.initialize(), timeout=SEND_TIMEOUT_SECONDS)
                self._deliverers[bot_id] = deliverer
        return deliverer, loop

    def deliver(self, outbox_id: int) -> bool:
        """Send one reply if it is due and unclaimed; ``True`` when this call delivered it.

        Inside a traced turn the attempt is a ``hubbub.delivery`` span of it. A retry after
        the turn (the sweeper's, a retry task's) is the root of a trace of its own, linked
        to the turn's trace through the traceparent stored with the message it answers.
        """
        if tracing.enabled() and not tracing.recording():
            with read_transaction(self._factory) as db:
                origin = OutboxRepository.from_session(db).trace_origin(outbox_id)
            attempt = tracing.span(
                "hubbub.delivery", root=True, links=(origin,), kind=tracing.SpanKind.PRODUCER
            )
        else:
            attempt = tracing.nested("hubbub.delivery", kind=tracing.SpanKind.PRODUCER)
        with attempt as span:
            delivered = self._deliver(outbox_id)
            if span.is_recording():
                span.set_attributes({"hubbub.outbox_id": outbox_id, "hubbub.delivered": delivered})
            return delivered

    def _deliver(self, outbox_id: int) -> bool:
        # The claim is durable: it must be on disk before anything reaches the platform.
        with transaction(self._factory) as db:
            repo = OutboxRepository.from_session(db)
            claim = repo.claim(outbox_id, claim_seconds=CLAIM_SECONDS)
            # The draft messages a streamed reply grew in: the delivery edits them.
            streamed = (
                repo.streamed(claim.trigger_message_id)
                if claim is not None and claim.platform in EDITED_PLATFORMS
                else None
            )
        if claim is None:
            return False
        try:
            deliverer, loop = self._deliverer(claim.bot_id)
        except Exception as exc:
            log.exception("no deliverer", extra={"outbox_id": claim.id, "platform": claim.platform})
            # Nothing was sent, but an outcome left unsettled by an earlier attempt still is.
            self._after_failure(claim, self._nothing_new(claim, exc, maybe_sent=False))
            return False
        try:
            outbound = _outbound(claim, deliverer.config.bot_name, streamed)
            drafts = (
                RecordedDrafts(self._factory, claim.trigger_message_id)
                if outbound.streamed_ids
                else None
            )
            ids = loop.run(
                waiting_in_all_at_most(PACING_BUDGET_SECONDS, deliverer.deliver(outbound, drafts)),
                timeout=SEND_TIMEOUT_SECONDS,
            )
        except DeliveryError as exc:
            self._after_failure(claim, exc)
            return False
        except Exception as exc:
            # A send timeout or a bug in the middle of sending: the platform may have it.
            log.exception(
                "delivery crashed", extra={"outbox_id": claim.id, "platform": claim.platform}
            )
            self._after_failure(claim, self._nothing_new(claim, exc, maybe_sent=True))
            return False
        return self._after_success(claim, ids, durable=not deliverer.local)

    @staticmethod
    def _nothing_new(claim: ClaimedReply, exc: Exception, *, maybe_sent: bool) -> DeliveryError:
        """What is known when the deliverer could not say: the progress the claim started with."""
        return DeliveryError(
            f"{type(exc).__name__}: {exc}",
            retryable=True,
            maybe_sent=maybe_sent or claim.unsettled_since is not None,
            delivered_chunks=claim.delivered_chunks,
            delivered_ids=claim.platform_message_ids,
        )

    def _after_success(self, claim: ClaimedReply, ids: list[str], *, durable: bool) -> bool:
        try:
            self._record(lambda repo: repo.mark_sent(claim.id, ids), durable=durable)
        except DATABASE_UNAVAILABLE:
            metrics.ERRORS.labels("delivery_record").inc()
            log.error(
                "reply delivered, but the database stayed unavailable to record it; the "
                "sweeper settles it once the claim expires",
                extra={"outbox_id": claim.id, "platform": claim.platform, "ids": ids},
            )
            return True
        metrics.DELIVERIES.labels(claim.platform, "sent").inc()
        if claim.unsettled_since is not None:
            metrics.UNSETTLED_SENDS.labels(claim.platform, "settled").inc()
            log.info(
                "an unknown outcome was settled and the reply is delivered",
                extra={"outbox_id": claim.id, "platform": claim.platform},
            )
        return True

    def _after_failure(self, claim: ClaimedReply, exc: DeliveryError) -> None:
        record = DeliveryRecord(
            error=str(exc),
            delivered_chunks=exc.delivered_chunks,
            platform_message_ids=list(exc.delivered_ids),
            # The earliest moment the unsettled chunk may have reached the platform.
            unsettled_since=(claim.unsettled_since or claim.claimed_at) if exc.maybe_sent else None,
        )
        write: Callable[[OutboxRepository], bool]
        if exc.retryable and claim.attempts < self._max_attempts:
            delay = min(RETRY_BASE_SECONDS * 2 ** (claim.attempts - 1), RETRY_MAX_SECONDS)
            if exc.retry_after is not None:
                delay = max(delay, exc.retry_after)
            outcome = "retry"
            write = lambda repo: repo.mark_retry(claim, record, delay_seconds=delay)  # noqa: E731
        elif exc.maybe_sent:
            outcome = "unknown"
            write = lambda repo: repo.mark_unknown(claim, record)  # noqa: E731
        else:
            outcome = "failed"
            write = lambda repo: repo.mark_failed(claim, record)  # noqa: E731
        context = {"outbox_id": claim.id, "platform": claim.platform, "outcome": outcome}
        try:
            recorded = self._record(write, durable=True)
        except DATABASE_UNAVAILABLE:
            metrics.ERRORS.labels("delivery_record").inc()
            log.error("could not record a failed delivery; the sweeper retries it", extra=context)
            return
        if not recorded:
            log.info("a later attempt holds the reply; this outcome is dropped", extra=context)
            return
        metrics.DELIVERIES.labels(claim.platform, outcome).inc()
        if exc.maybe_sent:
            settling = "settling" if outcome == "retry" else "unknown"
            metrics.UNSETTLED_SENDS.labels(claim.platform, settling).inc()
        if outcome == "unknown":
            log.warning(
                "delivery outcome unknown: the platform may or may not have the reply; it is "
                "not sent again",
                extra={**context, "error": record.error},
            )
        else:
            log.warning("delivery failed", extra={**context, "maybe_sent": exc.maybe_sent})

    def _record(self, write: Callable[[OutboxRepository], T], *, durable: bool) -> T:
        """Commit ``write`` (on disk unless ``durable`` is off), waiting out a database outage.

        Raises:
            OperationalError | InterfaceError: the database stayed away too long.
        """

        def attempt() -> T:
            with transaction(self._factory, durable=durable) as db:
                return write(OutboxRepository.from_session(db))

        return self._record_retrying(attempt)

    def draft_editor(
        self, bot_id: int
    ) -> tuple[DraftEditor, dict[str, Any], BackgroundLoop] | None:
        """The bot's deliverer as a draft editor (with its options), if it can stream.

        Drafts go through the very deliverer that delivers the bot's replies, so whatever
        paces its platform calls paces the drafts too.
        """
        try:
            deliverer, loop = self._deliverer(bot_id)
        except Exception:
            log.warning("no deliverer to stream with", extra={"bot_id": bot_id}, exc_info=True)
            return None
        if not isinstance(deliverer, DraftEditor):
            return None
        return deliverer, deliverer.config.extra, loop

    def draft_publisher(self, bot_id: int) -> tuple[DraftFeed, dict[str, Any]] | None:
        """How a web chat bot's pages are shown drafts (with its options), if it is one."""
        try:
            deliverer, _ = self._deliverer(bot_id)
        except Exception:
            log.warning("no deliverer to stream with", extra={"bot_id": bot_id}, exc_info=True)
            return None
        if not isinstance(deliverer, WebchatDeliverer):
            return None
        return deliverer, deliverer.config.extra

    def typing(self, chat_session: ChatSession) -> None:
        """Show a typing indicator in the session's chat; never fails the turn."""
        try:
            deliverer, loop = self._deliverer(chat_session.bot_id)
            if type(deliverer).send_typing is Deliverer.send_typing:
                return  # this platform shows no typing indicator; skip the loop round trip
            target = ChatTarget(
                platform=chat_session.platform,
                bot_name=deliverer.config.bot_name,
                chat_id=chat_session.chat_id,
                thread_id=chat_session.thread_id,
            )
            loop.submit(deliverer.send_typing(target))
        except Exception:
            log.debug("typing indicator failed", exc_info=True)

    def requeue_stale_claims(self) -> int:
        """Put replies whose deliverer died mid-send back in line, to be settled first."""
        with transaction(self._factory) as db:
            interrupted = OutboxRepository.from_session(db).requeue_stale_claims(now=utcnow())
        for reply in interrupted:
            metrics.UNSETTLED_SENDS.labels(reply.platform, "interrupted").inc()
            log.warning(
                "a delivery was interrupted mid-send; the next attempt settles its outcome",
                extra={"outbox_id": reply.id, "platform": reply.platform},
            )
        return len(interrupted)

    def close(self) -> None:
        """Shut every deliverer down and stop the loop."""
        with self._lock:
            loop, self._loop = self._loop, None
            deliverers, self._deliverers = list(self._deliverers.values()), {}
        if loop is None:
            return
        for deliverer in deliverers:
            try:
                loop.run(deliverer.shutdown(), timeout=10)
            except Exception:
                log.warning("deliverer shutdown failed", exc_info=True)
        loop.close()
