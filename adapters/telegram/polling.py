"""Receive a bot's updates by long polling ``getUpdates`` (when there is no public URL).

Polling and webhooks exclude each other on Telegram, so the listener first removes any
webhook (keeping the updates queued for it), then polls. An update is confirmed to
Telegram (the next ``offset``) only after it was stored, so a crash or a cancellation
re-fetches it and the downstream dedupe drops the copy. Short network trouble is retried
here; anything persistent (a refused token, another poller, repeated failures) is raised
so the gateway restarts the listener with back-off.
"""

from __future__ import annotations

import asyncio
import logging

from telegram import Bot
from telegram.error import BadRequest, NetworkError, RetryAfter

from adapters.base import BotConfig, InboundSink, Listener
from adapters.telegram.client import build_bot, retry_after_seconds
from adapters.telegram.inbound import BotIdentity
from adapters.telegram.receiver import ALLOWED_UPDATES, UpdateReceiver
from adapters.telegram.startup import announce

log = logging.getLogger(__name__)

POLL_TIMEOUT_SECONDS = 30
"""How long Telegram holds a ``getUpdates`` call open when there is nothing new."""
MAX_CONSECUTIVE_FAILURES = 5
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 15.0


class PollingListener(Listener):
    """Long-polls one bot's updates into the sink.

    Args:
        config: the bot.
        sink: where received messages go.
        poll_timeout: seconds Telegram may hold each ``getUpdates`` call.
    """

    def __init__(
        self, config: BotConfig, sink: InboundSink, *, poll_timeout: int = POLL_TIMEOUT_SECONDS
    ) -> None:
        super().__init__(config, sink)
        if poll_timeout < 0:
            raise ValueError("`poll_timeout` must not be negative")
        self._poll_timeout = poll_timeout

    async def run(self) -> None:
        """Poll until cancelled.

        Raises:
            TelegramError: the token was refused, another client polls or set a webhook
                (``Conflict``), or the network failed several times in a row.
            Exception: the sink could not store an update (it will be fetched again).
        """
        bot = build_bot(self.config)
        try:
            await bot.initialize()
            await bot.delete_webhook(drop_pending_updates=False)
            await announce(bot, self.config)
            receiver = UpdateReceiver(self.config, self.sink, BotIdentity.from_user(bot.bot))
            log.info(
                "Telegram long polling started",
                extra={"bot": self.config.bot_name, "username": bot.username},
            )
            await self._poll(bot, receiver)
        finally:
            await bot.shutdown()

    async def _poll(self, bot: Bot, receiver: UpdateReceiver) -> None:
        offset: int | None = None
        failures = 0
        while True:
            try:
                updates = await bot.get_updates(
                    offset=offset,
                    timeout=self._poll_timeout,
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_seconds(exc))
                continue
            except BadRequest:
                raise
            except NetworkError as exc:
                failures += 1
                if failures >= MAX_CONSECUTIVE_FAILURES:
                    raise
                delay = min(RETRY_BASE_SECONDS * 2 ** (failures - 1), RETRY_MAX_SECONDS)
                log.warning(
                    "Telegram getUpdates failed; retrying",
                    extra={"error": str(exc), "failures": failures, "delay_seconds": delay},
                )
                await asyncio.sleep(delay)
                continue
            failures = 0
            for update in updates:
                await receiver.receive(update)
                offset = update.update_id + 1
