"""Build python-telegram-bot clients for a bot, and read what its errors carry.

Every part of the adapter talks to the Bot API through a :class:`telegram.Bot` made here,
so the API base (a self-hosted Bot API server, or a local fake in tests) and the HTTP
timeouts are set in one place.

A deliverer's client is paced (:class:`PacedRequest`): Telegram allows a bot about 30
messages a second, one a second per chat and 20 a minute per group (a negative chat id),
edits and deletions included, so each such call first waits for its slot in the bot's
shared scheduler (:mod:`adapters.pacing`). A slot too far away fails the call as
Telegram's own 429 would (:class:`~telegram.error.RetryAfter`), before anything is sent,
so the deliverer's handling of a 429 is also its handling of ours; a 429 Telegram answers
holds the chat back for every worker.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from http import HTTPStatus
from typing import Any

from telegram import Bot
from telegram._utils.defaultvalue import DEFAULT_NONE
from telegram._utils.types import ODVInput
from telegram.error import RetryAfter
from telegram.request import HTTPXRequest, RequestData

from adapters.base import BotConfig
from adapters.pacing import BotPacer, Bucket, PaceExceeded
from adapters.telegram.options import api_base, require_token

PTB_TIMEDELTA_ENV = "PTB_TIMEDELTA"
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 15.0
"""For ordinary calls; ``getUpdates`` adds its long-poll timeout on top (PTB does this)."""
WRITE_TIMEOUT_SECONDS = 15.0
POOL_TIMEOUT_SECONDS = 5.0
CONNECTION_POOL_SIZE = 32
"""Concurrent calls per client (deliveries to many chats share one deliverer)."""
PACED_METHODS = frozenset(
    {
        "sendMessage",
        "editMessageText",
        "deleteMessage",
        "sendPhoto",
        "sendDocument",
        "copyMessage",
        "forwardMessage",
    }
)
"""Calls that post, change or remove a message (chat actions and reads are not paced)."""


def opt_into_timedelta() -> None:
    """Make PTB report durations (``RetryAfter.retry_after``) as ``timedelta``.

    PTB 22 warns whenever it builds a ``RetryAfter`` unless ``PTB_TIMEDELTA`` is set, and
    PTB 23 will always use ``timedelta``. Setting it process-wide keeps the type the same in
    the gateway, the workers and the tests. An operator's own value wins; code reading the
    value copes with both types (:func:`retry_after_seconds`).
    """
    os.environ.setdefault(PTB_TIMEDELTA_ENV, "true")


def is_group(chat_id: str) -> bool:
    """Groups, supergroups and channels have negative ids in the Bot API."""
    return chat_id.startswith("-")


class PacedRequest(HTTPXRequest):
    """PTB's HTTP transport, asking the bot's pacer before each message call."""

    def __init__(self, pacer: BotPacer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pacer = pacer

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = DEFAULT_NONE,
        write_timeout: ODVInput[float] = DEFAULT_NONE,
        connect_timeout: ODVInput[float] = DEFAULT_NONE,
        pool_timeout: ODVInput[float] = DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        """Make the call once its slot comes; a 429 answer holds the chat back fleet-wide.

        Raises:
            RetryAfter: no slot within the bot's maximum wait (nothing was sent).
        """
        paced = url.rsplit("/", 1)[-1] in PACED_METHODS
        chat = request_data.parameters.get("chat_id") if request_data is not None else None
        chat_id = str(chat) if chat is not None else None
        if paced:
            try:
                await self._pacer.acquire(self._buckets(chat_id))
            except PaceExceeded as exc:
                raise RetryAfter(dt.timedelta(seconds=exc.wait)) from exc
        code, payload = await super().do_request(
            url,
            method,
            request_data,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
        )
        if paced and code == HTTPStatus.TOO_MANY_REQUESTS:
            await self._pacer.rate_limited(self._held_back(chat_id), _retry_after(payload))
        return code, payload

    def _buckets(self, chat_id: str | None) -> list[Bucket | None]:
        buckets = [self._pacer.bucket("bot")]
        if chat_id is not None:
            buckets.append(self._pacer.bucket("chat", chat_id))
            if is_group(chat_id):
                buckets.append(self._pacer.bucket("group", chat_id))
        return buckets

    def _held_back(self, chat_id: str | None) -> list[str]:
        """What Telegram's 429 names: the chat (and its group bucket), else the bot."""
        if chat_id is None:
            return [self._pacer.key("bot")]
        keys = [self._pacer.key("chat", chat_id)]
        if is_group(chat_id):
            keys.append(self._pacer.key("group", chat_id))
        return keys


def _retry_after(payload: bytes) -> float:
    """``parameters.retry_after`` of a 429's body, or 1 s when it cannot be read."""
    try:
        return float(json.loads(payload)["parameters"]["retry_after"])
    except (ValueError, KeyError, TypeError):
        return 1.0


def _request(pacer: BotPacer | None = None) -> HTTPXRequest:
    options: dict[str, Any] = {
        "connection_pool_size": CONNECTION_POOL_SIZE,
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "read_timeout": READ_TIMEOUT_SECONDS,
        "write_timeout": WRITE_TIMEOUT_SECONDS,
        "pool_timeout": POOL_TIMEOUT_SECONDS,
    }
    return HTTPXRequest(**options) if pacer is None else PacedRequest(pacer, **options)


def build_bot(config: BotConfig, *, pacer: BotPacer | None = None) -> Bot:
    """An uninitialised client for the bot (``await bot.initialize()`` calls ``getMe``).

    Args:
        config: the bot.
        pacer: paces the calls that post or change messages (deliverers pass theirs).

    Raises:
        TelegramConfigError: the bot has no token.
    """
    opt_into_timedelta()
    return Bot(
        require_token(config),
        base_url=api_base(config),
        request=_request(pacer),
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
