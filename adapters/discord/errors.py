"""Translate discord.py and network failures into Hubbub's adapter errors.

The only module of the deliverer that names discord.py's exception classes. It also
decides what a failed post proves: Discord refused it, or the request never left
(connection refused, DNS), so nothing was created; or the answer was lost (a timeout, a
dropped connection, a 5xx after discord.py's own retries), so Discord may have created
the message. The second kind is settled by posting again with the same enforced nonce,
which Discord answers with the message it created, if it did.

::

    DeliveryError(retryable, retry_after)   from adapters.base
    DiscordListenerError                    the gateway connection cannot run as configured
"""

from __future__ import annotations

import asyncio

import aiohttp
import discord

from adapters.base import AdapterError, DeliveryError, DeliveryProgress

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 522, 524})
"""HTTP statuses that may pass if the same request is made later."""
INVALID_FORM_BODY = 50035
"""Discord's error code for a request body it refuses (e.g. content it cannot accept)."""
UNKNOWN_MESSAGE = 10008
"""Discord's error code (with a 404) for a message that does not exist, or no longer."""
MISSING_ACCESS = 50001
MISSING_PERMISSIONS = 50013

SEND_FAILURES: tuple[type[BaseException], ...] = (
    discord.DiscordException,
    aiohttp.ClientError,
    OSError,
    asyncio.TimeoutError,
)
"""What sending a message may raise, all handled by :func:`delivery_error`."""


class DiscordListenerError(AdapterError):
    """The gateway connection cannot run as configured (bad token, intents not enabled)."""


def is_invalid_form(exc: BaseException) -> bool:
    """Whether Discord refused the message body itself (not the channel, rights or rate)."""
    return (
        isinstance(exc, discord.HTTPException)
        and exc.status == 400
        and exc.code == INVALID_FORM_BODY
    )


def is_gone(exc: BaseException) -> bool:
    """Whether Discord says the message to edit or delete does not exist (any more)."""
    return isinstance(exc, discord.NotFound) and exc.code == UNKNOWN_MESSAGE


def delivery_error(exc: BaseException, progress: DeliveryProgress) -> DeliveryError:
    """The :class:`DeliveryError` for ``exc``, raised while posting the next chunk.

    Args:
        exc: what discord.py or the network raised.
        progress: the chunks of this reply Discord already has.
    """
    reason = describe(exc)
    if created_nothing(exc):
        return progress.failure(reason, retryable=is_transient(exc), retry_after=retry_after(exc))
    return progress.failure(
        f"{reason}; Discord may have posted message {progress.chunks + 1} of the reply, so it "
        "is sent again only with the same nonce, which Discord enforces",
        retryable=True,
        maybe_sent=True,
    )


def created_nothing(exc: BaseException) -> bool:
    """Whether ``exc`` proves Discord created no message: it refused, or was never reached."""
    if isinstance(exc, discord.RateLimited | discord.LoginFailure):
        return True
    if isinstance(exc, discord.HTTPException):
        return exc.status < 500
    return isinstance(exc, aiohttp.ClientConnectorError)


def is_transient(exc: BaseException) -> bool:
    """Whether the same request may succeed later (rate limit, outage, network)."""
    if isinstance(exc, discord.RateLimited | discord.DiscordServerError):
        return True
    if isinstance(exc, discord.HTTPException):
        return exc.status in TRANSIENT_STATUSES or exc.status >= 500
    return isinstance(exc, aiohttp.ClientError | OSError | asyncio.TimeoutError)


def retry_after(exc: BaseException) -> float | None:
    """Seconds Discord asked us to wait, when it said."""
    if isinstance(exc, discord.RateLimited):
        return float(exc.retry_after)
    if isinstance(exc, discord.HTTPException) and exc.status == 429:
        header = exc.response.headers.get("Retry-After")
        try:
            return float(header) if header is not None else None
        except ValueError:
            return None
    return None


def describe(exc: BaseException) -> str:
    """A one-line reason an operator can act on."""
    if isinstance(exc, discord.LoginFailure):
        return "Discord rejected the bot token (check HUBBUB_DISCORD_TOKEN)"
    if isinstance(exc, discord.RateLimited):
        return f"Discord rate limit longer than we wait in place ({exc.retry_after:.1f}s)"
    if isinstance(exc, discord.HTTPException):
        hint = ""
        if exc.code in (MISSING_ACCESS, MISSING_PERMISSIONS):
            hint = (
                " (the bot needs View Channel, Send Messages, Send Messages in Threads and "
                "Read Message History in this channel)"
            )
        detail = exc.text or exc.response.reason or ""
        return f"Discord answered {exc.status} (code {exc.code}): {detail}{hint}"
    if isinstance(exc, asyncio.TimeoutError):
        return "Discord did not answer in time"
    return f"could not reach Discord: {type(exc).__name__}: {exc}"
