"""What a failed ``sendMessage`` says about the message: refused, never arrived, or unknown.

The only module of the adapter that reads python-telegram-bot's and httpx's exceptions for
deliveries. PTB raises :class:`telegram.error.TimedOut` for every httpx timeout and
:class:`telegram.error.NetworkError` for every other transport failure and for 5xx
answers; the httpx exception it was raised from (``__cause__``) tells them apart:

- ``ConnectError`` (refused, DNS), ``ConnectTimeout`` and ``PoolTimeout`` happen before
  any byte of the request leaves: nothing was sent, another attempt is safe.
- A read or write timeout, a dropped connection or a 5xx (Telegram does not document that
  a 5xx means nothing was posted) may come after Telegram posted the message. The Bot API
  has no idempotency key and bots cannot read a chat's history, so such an outcome can
  never be settled: it is unknown, and the message is never sent again.
- An answer with an error code (400, 403, 401/404, 409, 429, a migrated chat) is a refusal:
  nothing was posted.
"""

from __future__ import annotations

from enum import Enum

import httpx
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

NEVER_SENT_CAUSES: tuple[type[BaseException], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
"""httpx failures that happen before the request leaves this machine."""
REFUSALS: tuple[type[TelegramError], ...] = (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    RetryAfter,
)
"""Telegram answered and did not post the message."""


class SendOutcome(Enum):
    """What a failed send proves about the message."""

    REFUSED = "refused"
    """Telegram answered and posted nothing."""
    NEVER_SENT = "never_sent"
    """The request never reached Telegram: sending again is safe."""
    UNKNOWN = "unknown"
    """Telegram may have posted it: never send it again."""


def send_outcome(error: TelegramError) -> SendOutcome:
    """What ``error``, raised by a ``sendMessage`` call, proves about the message."""
    if isinstance(error, REFUSALS):
        return SendOutcome.REFUSED
    if isinstance(error, NetworkError) and isinstance(error.__cause__, NEVER_SENT_CAUSES):
        return SendOutcome.NEVER_SENT
    return SendOutcome.UNKNOWN
