"""Keep a bot's webhook registered with Telegram while the gateway runs (webhook mode).

Runs as the bot's listener, so the gateway's supervisor retries it with back-off when
Telegram cannot be reached at start. It calls ``setWebhook`` with the public URL, the
secret token and the update kinds Hubbub handles, then checks ``getWebhookInfo`` now and
then: it puts the URL back if something else replaced it and logs Telegram's delivery
errors (a wrong public URL, TLS problems) where operators will see them. On shutdown the
webhook stays set, so Telegram queues updates until the gateway is back.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from telegram import Bot
from telegram.error import Forbidden, InvalidToken, TelegramError

from adapters.base import BotConfig, InboundSink, Listener
from adapters.telegram.client import build_bot
from adapters.telegram.options import ReceiveOptions
from adapters.telegram.receiver import ALLOWED_UPDATES
from adapters.telegram.startup import announce

log = logging.getLogger(__name__)

CHECK_INTERVAL_SECONDS = 300.0


class WebhookRegistration(Listener):
    """Registers the webhook, then watches that it stays ours.

    Args:
        config: the bot.
        sink: unused (updates arrive at the webhook handler); kept for the listener seam.
        options: webhook-mode options with the URL and the secret token.
        check_interval: seconds between ``getWebhookInfo`` checks.
    """

    def __init__(
        self,
        config: BotConfig,
        sink: InboundSink,
        options: ReceiveOptions,
        *,
        check_interval: float = CHECK_INTERVAL_SECONDS,
    ) -> None:
        super().__init__(config, sink)
        if options.mode != "webhook" or not options.webhook_url or not options.secret_token:
            raise ValueError("`options` must be webhook options with a URL and a secret token")
        self._url = options.webhook_url
        self._secret = options.secret_token
        self._check_interval = check_interval
        self._last_error: datetime | None = None

    async def run(self) -> None:
        """Register, then check until cancelled.

        Raises:
            TelegramError: registering failed (the supervisor retries with back-off), or the
                token was refused while checking.
        """
        bot = build_bot(self.config)
        try:
            await bot.initialize()
            await self._register(bot)
            await announce(bot, self.config)
            while True:
                await asyncio.sleep(self._check_interval)
                await self._check(bot)
        finally:
            await bot.shutdown()

    async def _register(self, bot: Bot) -> None:
        await bot.set_webhook(
            url=self._url,
            secret_token=self._secret,
            allowed_updates=list(ALLOWED_UPDATES),
            drop_pending_updates=False,
        )
        log.info(
            "Telegram webhook registered", extra={"bot": self.config.bot_name, "url": self._url}
        )

    async def _check(self, bot: Bot) -> None:
        try:
            info = await bot.get_webhook_info()
        except (InvalidToken, Forbidden):
            raise
        except TelegramError as exc:
            log.warning("Telegram getWebhookInfo failed", extra={"error": str(exc)})
            return
        if info.url != self._url:
            log.warning(
                "Telegram webhook was changed elsewhere; registering ours again",
                extra={"bot": self.config.bot_name, "found": info.url},
            )
            await self._register(bot)
        if info.last_error_date is not None and info.last_error_date != self._last_error:
            self._last_error = info.last_error_date
            log.warning(
                "Telegram reports failed webhook deliveries",
                extra={
                    "bot": self.config.bot_name,
                    "error": info.last_error_message,
                    "at": info.last_error_date.isoformat(),
                    "pending": info.pending_update_count,
                },
            )
