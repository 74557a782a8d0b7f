"""Build python-telegram-bot clients for a bot, and read what its errors carry.

Every part of the adapter talks to the Bot API through a :class:`telegram.Bot` made here,
so the API base (a self-hosted Bot API server, or a local fake in tests) and the HTTP
timeouts are set in one place.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings

from telegram import Bot
from telegram.error import RetryAfter
from telegram.request import HTTPXRequest

from adapters.base import BotConfig
from adapters.telegram.options import api_base, require_token

PTB_TIMEDELTA_ENV = "PTB_TIMEDELTA"
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 15.0
"""For ordinary calls; ``getUpdates`` adds its long-poll timeout on top (PTB does this)."""
WRITE_TIMEOUT_SECONDS = 15.0
POOL_TIMEOUT_SECONDS = 5.0
CONNECTION_POOL_SIZE = 32
"""Concurrent calls per client (deliveries to many chats share one deliverer)."""


def opt_into_timedelta() -> None:
    """Make PTB report durations (``RetryAfter.retry_after``) as ``timedelta``.

    PTB 22 warns whenever it builds a ``RetryAfter`` unless ``PTB_TIMEDELTA`` is set, and
    PTB 23 will always use ``timedelta``. Setting it process-wide keeps the type the same in
    the gateway, the workers and the tests. An operator's own value wins; code reading the
    value copes with both types (:func:`retry_after_seconds`).
    """
    os.environ.setdefault(PTB_TIMEDELTA_ENV, "true")


def _request() -> HTTPXRequest:
    return HTTPXRequest(
        connection_pool_size=CONNECTION_POOL_SIZE,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        write_timeout=WRITE_TIMEOUT_SECONDS,
        pool_timeout=POOL_TIMEOUT_SECONDS,
    )


def build_bot(config: BotConfig) -> Bot:
    """An uninitialised client for the bot (``await bot.initialize()`` calls ``getMe``).

    Raises:
        TelegramConfigError: the bot has no token.
    """
    opt_into_timedelta()
    return Bot(
        require_token(config),
        base_url=api_base(config),
        request=_request(),
        get_updates_request=_request(),
    )


def retry_after_seconds(error: RetryAfter) -> float:
    """How long Telegram asked us to wait, in seconds, whatever PTB's duration setting."""
    with warnings.catch_warnings():
        # Only an operator who set PTB_TIMEDELTA=false gets here with an int and a warning.
        warnings.simplefilter("ignore", DeprecationWarning)
        value = error.retry_after
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)
