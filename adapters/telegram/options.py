"""Read a Telegram bot's receiving options from its :class:`BotConfig` and check them.

A bot receives either through a webhook at ``{public_url}/webhooks/telegram/{bot_id}`` or by
long polling. ``auto`` (the default) picks the webhook when a public URL is configured.
Webhook mode without a secret token is refused: anybody who guesses the URL could post
updates in the bot's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from adapters.base import AdapterError, BotConfig

PLATFORM = "telegram"
DEFAULT_API_BASE = "https://api.telegram.org/bot"
DEFAULT_TENANT = "default"
"""The tenant whose bots are addressed by name alone in webhook URLs (see ``bot_path_id``)."""
WEBHOOK_PATH = "/webhooks/telegram/{bot_id}"
SECRET_TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
"""What Telegram accepts as ``secret_token`` in ``setWebhook``."""

Mode = Literal["webhook", "polling"]
_MODES = ("auto", "webhook", "polling")


class TelegramConfigError(AdapterError):
    """The bot's Telegram settings cannot work; the message names the setting to fix."""

    def __init__(self, message: str, *, bot_name: str) -> None:
        super().__init__(message, bot_name)
        self.bot_name = bot_name
        """The bot whose settings are wrong."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class ReceiveOptions:
    """How one bot receives updates."""

    mode: Mode
    webhook_url: str | None = None
    """Where Telegram posts updates (webhook mode only)."""
    secret_token: str | None = None
    """Expected in ``X-Telegram-Bot-Api-Secret-Token`` (webhook mode only)."""


def bot_path_id(config: BotConfig) -> str:
    """The ``{bot_id}`` part of the bot's webhook URL.

    Mirrors ``gateway.supervisor.bot_path_id`` (adapters may not import the gateway); a test
    keeps the two in step.
    """
    if config.tenant_id == DEFAULT_TENANT:
        return config.bot_name
    return f"{config.tenant_id}.{config.bot_name}"


def api_base(config: BotConfig) -> str:
    """The Bot API URL prefix the token is appended to (``…/bot``)."""
    return config.api_base or DEFAULT_API_BASE


def require_token(config: BotConfig) -> str:
    """The bot token.

    Raises:
        TelegramConfigError: no token is configured.
    """
    if not config.token:
        raise TelegramConfigError(
            f"Telegram bot {config.bot_name!r} has no token (HUBBUB_TELEGRAM_TOKEN)",
            bot_name=config.bot_name,
        )
    return config.token


def receive_options(config: BotConfig) -> ReceiveOptions:
    """Decide between webhook and polling and check what that mode needs.

    Raises:
        TelegramConfigError: the mode is unknown, or webhook mode lacks a public URL or a
            valid secret token.
    """
    requested = str(config.extra.get("mode") or "auto")
    if requested not in _MODES:
        raise TelegramConfigError(
            f"Telegram mode {requested!r} is not one of {', '.join(_MODES)} (HUBBUB_TELEGRAM_MODE)",
            bot_name=config.bot_name,
        )
    public_url = str(config.extra.get("public_url") or "").rstrip("/")
    if requested == "polling" or (requested == "auto" and not public_url):
        return ReceiveOptions(mode="polling")
    if not public_url:
        raise TelegramConfigError(
            "Telegram webhook mode needs a public URL (HUBBUB_PUBLIC_URL)",
            bot_name=config.bot_name,
        )
    secret = config.extra.get("webhook_secret")
    if not secret:
        raise TelegramConfigError(
            "refusing Telegram webhook mode without a secret token: set "
            "HUBBUB_TELEGRAM_WEBHOOK_SECRET (or HUBBUB_TELEGRAM_MODE=polling)",
            bot_name=config.bot_name,
        )
    if not SECRET_TOKEN_PATTERN.match(str(secret)):
        raise TelegramConfigError(
            "HUBBUB_TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - "
            "(Telegram's rule for secret_token)",
            bot_name=config.bot_name,
        )
    path = WEBHOOK_PATH.format(bot_id=bot_path_id(config))
    return ReceiveOptions(mode="webhook", webhook_url=public_url + path, secret_token=str(secret))
