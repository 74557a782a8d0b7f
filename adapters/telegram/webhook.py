"""Receive Telegram updates posted to ``/webhooks/telegram/{bot_id}``.

Every request must carry the secret token registered with ``setWebhook`` in
``X-Telegram-Bot-Api-Secret-Token``; anything else gets a 403 and nothing is stored. A
verified update is parsed by PTB, stored through the sink and answered with 200 at once
(no model work happens here). Answers other than 2xx make Telegram retry later, so
malformed bodies get a 400 (a retry would not help) and storage failures a 503.

The webhook itself is registered with Telegram by :mod:`adapters.telegram.registration`,
which runs as the bot's listener in webhook mode.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Mapping

from telegram import Update
from telegram.error import TelegramError

from adapters.base import (
    BotConfig,
    InboundSink,
    WebhookHandler,
    WebhookResponse,
    WebhookVerificationError,
)
from adapters.telegram.client import build_bot
from adapters.telegram.inbound import BotIdentity
from adapters.telegram.options import ReceiveOptions
from adapters.telegram.receiver import UpdateReceiver

log = logging.getLogger(__name__)

SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105 (a header name)
FORBIDDEN = 403
_OK = WebhookResponse(status=200, body=b"", content_type="text/plain")


def _answer(status: int, error: str) -> WebhookResponse:
    return WebhookResponse(status=status, body=json.dumps({"error": error}).encode())


class TelegramWebhook(WebhookHandler):
    """One bot's webhook endpoint: verify, parse, deduplicate, store.

    Args:
        config: the bot.
        sink: where received messages go.
        options: webhook-mode options (the secret token is required).
    """

    def __init__(self, config: BotConfig, sink: InboundSink, options: ReceiveOptions) -> None:
        super().__init__(config, sink)
        if options.mode != "webhook" or not options.secret_token:
            raise ValueError("`options` must be webhook options with a secret token")
        self._secret = options.secret_token.encode()
        self._bot = build_bot(config)
        self._receiver: UpdateReceiver | None = None
        self._identity_lock = asyncio.Lock()

    async def initialize(self) -> None:
        """Learn the bot's identity now if Telegram answers, else on the first update."""
        try:
            await self._ready_receiver()
        except TelegramError as exc:
            log.warning(
                "Telegram getMe failed; retrying on the first update",
                extra={"bot": self.config.bot_name, "error": str(exc)},
            )

    async def shutdown(self) -> None:
        """Close the HTTP client."""
        await self._bot.shutdown()

    async def handle(self, headers: Mapping[str, str], body: bytes) -> WebhookResponse:
        """Verify the secret token and store the update; see the module docstring.

        Raises:
            WebhookVerificationError: the secret token header is missing or wrong (403).
        """
        self._verify(headers)
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return _answer(400, "body is not JSON")
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            return _answer(400, "body is not a Telegram update")
        try:
            update = Update.de_json(data, self._bot)
        except Exception as exc:  # PTB raises whatever the malformed field provokes
            log.info("unparseable Telegram update", extra={"error": repr(exc)})
            return _answer(400, "body is not a Telegram update")
        try:
            receiver = await self._ready_receiver()
            await receiver.receive(update)
        except Exception:
            log.exception(
                "Telegram update not stored; Telegram will retry",
                extra={"bot": self.config.bot_name, "update_id": update.update_id},
            )
            return WebhookResponse.unavailable("temporarily unable to accept updates")
        return _OK

    def _verify(self, headers: Mapping[str, str]) -> None:
        token = headers.get(SECRET_HEADER)
        if token is None:
            raise WebhookVerificationError("missing X-Telegram-Bot-Api-Secret-Token", FORBIDDEN)
        if not hmac.compare_digest(token.encode(), self._secret):
            raise WebhookVerificationError("wrong X-Telegram-Bot-Api-Secret-Token", FORBIDDEN)

    async def _ready_receiver(self) -> UpdateReceiver:
        async with self._identity_lock:
            if self._receiver is None:
                await self._bot.initialize()
                identity = BotIdentity.from_user(self._bot.bot)
                self._receiver = UpdateReceiver(self.config, self.sink, identity)
            return self._receiver
