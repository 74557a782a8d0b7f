"""Translate discord.py and network failures into Hubbub's adapter errors.

The only module of the deliverer that names discord.py's exception classes. The rule
that keeps replies from being sent twice lives here too: once part of a reply has been
sent, no failure is retryable (a retry re-sends the whole reply).

::

    DeliveryError(retryable, retry_after)   from adapters.base
    DiscordListenerError                    the gateway connection cannot run as configured
"""

from __future__ import annotations

import asyncio

import aiohttp
import discord

from adapters.base import AdapterError, DeliveryError

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 522, 524})
"""HTTP statuses that may pass if the same request is made later."""
INVALID_FORM_BODY = 50035
"""Discord's error code for a request body it refuses (e.g. content it cannot accept)."""
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


def delivery_error(exc: BaseException, *, sent: int) -> DeliveryError:
    """The :class:`DeliveryError` for ``exc``, raised after ``sent`` messages went out.

    Args:
        exc: what discord.py or the network raised.
        sent: how many messages of this reply Discord already accepted.
    """
    reason = describe(exc)
    if sent:
        return DeliveryError(
            f"{sent} message(s) of the reply reached Discord, then: {reason}; "
            "not retried, so nothing is sent twice",
            retryable=False,
        )
    return DeliveryError(reason, retryable=is_transient(exc), retry_after=retry_after(exc))


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
