"""Inbound rate limits: how many turns a sender, and a chat, may ask of one bot.

A flood from one person (or one busy chat) must not become one model call per message.
Over the limit a message is still stored, as context the model reads with the next
answered message, but it triggers no turn; the sender is told once per window. The
counters are the ``limits`` library's sliding windows, in Redis when Hubbub has a broker
(shared by every gateway) and in memory in the embedded setup (one process).

The limiter never refuses work because its own store is down: a Redis outage lets
messages through (logged and counted), as intake itself keeps accepting them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

import limits
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter

from agent_core.config import Settings
from workers import metrics

log = logging.getLogger(__name__)

REDIS_TIMEOUT_SECONDS = 0.5
"""Bound on each counter round trip: a slow Redis must not hold up intake."""
NAMESPACE = "hubbub-inbound"


class Verdict(StrEnum):
    """What the limits say about one message that asks for a turn."""

    ALLOWED = "allowed"
    LIMITED = "limited"
    """Over a limit; the sender was told already in this window."""
    LIMITED_TELL = "limited_tell"
    """Over a limit for the first time in this window: answer with a notice, not a turn."""


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks for a turn, and where."""

    tenant_id: str
    bot_id: int
    chat_id: str
    sender_id: str | None


class InboundLimiter:
    """Counts the turns asked per sender and per chat of each bot."""

    def __init__(self, storage: Storage, *, per_user: str, per_chat: str) -> None:
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._per_user = limits.parse_many(per_user) if per_user else []
        self._per_chat = limits.parse_many(per_chat) if per_chat else []
        windows = [item.get_expiry() for item in (*self._per_user, *self._per_chat)]
        self._tell = limits.RateLimitItemPerSecond(1, max(min(windows), 1)) if windows else None
        """One notice per sender per shortest window: told once, not once per message."""

    @classmethod
    def from_settings(cls, settings: Settings) -> InboundLimiter | None:
        """The deployment's limiter, or ``None`` when both limits are off."""
        if not settings.rate_limit_user and not settings.rate_limit_chat:
            return None
        storage: Storage
        if settings.redis_url is None:
            storage = MemoryStorage()
        else:
            storage = RedisStorage(
                settings.redis_url,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            )
        return cls(storage, per_user=settings.rate_limit_user, per_chat=settings.rate_limit_chat)

    def check(self, asker: Asker) -> Verdict:
        """Count one turn asked by ``asker``; whether it may run."""
        scope = (NAMESPACE, asker.tenant_id, str(asker.bot_id))
        chat = (*scope, "chat", asker.chat_id)
        user = (*scope, "user", asker.sender_id or "")
        try:
            within = all([self._limiter.hit(item, *chat) for item in self._per_chat])
            if asker.sender_id is not None:
                # Every window counts the attempt (a list, not a short-circuit), so a
                # sender over one window stays over it.
                user_within = all([self._limiter.hit(item, *user) for item in self._per_user])
                within = within and user_within
            if within:
                return Verdict.ALLOWED
            told = self._tell is not None and not self._limiter.hit(
                self._tell, *scope, "told", asker.chat_id, asker.sender_id or ""
            )
        except Exception as exc:  # the counter store is down: never refuse for that
            metrics.RATE_LIMIT_ERRORS.inc()
            log.warning(
                "rate limit store unavailable; message let through",
                extra={"bot_id": asker.bot_id, "error": type(exc).__name__},
            )
            return Verdict.ALLOWED
        return Verdict.LIMITED if told else Verdict.LIMITED_TELL
