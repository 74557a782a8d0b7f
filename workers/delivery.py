"""Deliver queued replies through their platform, at most once each.

One conditional UPDATE claims a reply before it is sent, so a task that runs twice (or two
workers that race) cannot send it twice; failures that may pass are retried with back-off.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from adapters.base import Deliverer, DeliveryError
from adapters.messages import ChatTarget, OutboundMessage
from adapters.registry import create_deliverer
from agent_core.db.base import utcnow
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession
from agent_core.outbox.repository import ClaimedReply, OutboxRepository
from workers import metrics
from workers.aio import BackgroundLoop
from workers.bots import BotDirectory

log = logging.getLogger(__name__)

CLAIM_SECONDS = 120.0
SEND_TIMEOUT_SECONDS = 100.0
RETRY_BASE_SECONDS = 2.0
RETRY_MAX_SECONDS = 300.0
TYPING_TIMEOUT_SECONDS = 5.0


def _outbound(entry: ClaimedReply, bot_name: str) -> OutboundMessage:
    return OutboundMessage(
        platform=entry.platform,
        bot_name=bot_name,
        chat_id=entry.chat_id,
        chat_type=entry.meta.get("chat_type", "private"),
        thread_id=entry.thread_id,
        text=entry.text,
        reply_to_message_id=entry.reply_to_platform_id,
        delivery_id=str(entry.id),
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
        """Send one reply if it is due and unclaimed; ``True`` when this call sent it."""
        # The claim is durable: it must be on disk before anything reaches the platform.
        with transaction(self._factory) as db:
            entry = OutboxRepository.from_session(db).claim(outbox_id, claim_seconds=CLAIM_SECONDS)
            if entry is None:
                return False
            bot_id, platform, attempts = entry.bot_id, entry.platform, entry.attempts
        try:
            deliverer, loop = self._deliverer(bot_id)
            outbound = _outbound(entry, deliverer.config.bot_name)
            ids = loop.run(deliverer.deliver(outbound), timeout=SEND_TIMEOUT_SECONDS)
        except DeliveryError as exc:
            self._record_failure(outbox_id, platform, attempts, str(exc), exc)
            return False
        except Exception as exc:
            log.exception("delivery crashed", extra={"outbox_id": outbox_id, "platform": platform})
            self._record_failure(
                outbox_id, platform, attempts, f"{type(exc).__name__}: {exc}", None
            )
            return False
        # Not waited to disk: if a crash loses it, the claim (durable) still says "sending"
        # and the reply is never sent again.
        with transaction(self._factory, durable=False) as db:
            OutboxRepository.from_session(db).mark_sent(outbox_id, ids)
        metrics.DELIVERIES.labels(platform, "sent").inc()
        return True

    def _record_failure(
        self,
        outbox_id: int,
        platform: str,
        attempts: int,
        error: str,
        exc: DeliveryError | None,
    ) -> None:
        retryable = exc.retryable if exc is not None else True
        with transaction(self._factory, durable=False) as db:
            repo = OutboxRepository.from_session(db)
            entry = repo.get(outbox_id)
            assert entry is not None
            if retryable and attempts < self._max_attempts:
                delay = min(RETRY_BASE_SECONDS * 2 ** (attempts - 1), RETRY_MAX_SECONDS)
                if exc is not None and exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)
                repo.mark_retry(entry, error, delay_seconds=delay)
                outcome = "retry"
            else:
                repo.mark_failed(entry, error)
                outcome = "failed"
        metrics.DELIVERIES.labels(platform, outcome).inc()
        log.warning(
            "delivery failed",
            extra={"outbox_id": outbox_id, "platform": platform, "outcome": outcome},
        )

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

    def expire_stale_claims(self) -> int:
        """Fail replies whose deliverer died mid-send (see the outbox repository)."""
        with transaction(self._factory) as db:
            return OutboxRepository.from_session(db).expire_stale_claims(now=utcnow())

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
