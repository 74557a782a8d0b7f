"""Telegram: bots in private chats, groups, supergroups and forum topics (python-telegram-bot).

A bot receives in one of two modes (:mod:`adapters.telegram.options`):

- **webhook**: Telegram posts updates to ``{public_url}/webhooks/telegram/{bot_id}``;
  :func:`create_webhook` verifies and stores them, and :func:`create_listener` returns the
  registration listener that calls ``setWebhook`` with the secret token on start.
- **polling**: :func:`create_listener` returns a long-polling listener; no webhook.

Replies go out through :class:`TelegramDeliverer`.
"""

from adapters.base import BotConfig, InboundSink, Listener, WebhookHandler
from adapters.telegram.client import opt_into_timedelta
from adapters.telegram.deliverer import TelegramDeliverer
from adapters.telegram.options import (
    PLATFORM,
    TelegramConfigError,
    receive_options,
    require_token,
)
from adapters.telegram.polling import PollingListener
from adapters.telegram.registration import WebhookRegistration
from adapters.telegram.webhook import TelegramWebhook

opt_into_timedelta()


def create_webhook(config: BotConfig, sink: InboundSink) -> WebhookHandler | None:
    """The bot's webhook handler in webhook mode; ``None`` when it polls.

    Raises:
        TelegramConfigError: webhook mode is asked for but cannot run safely (no public URL,
            no or malformed secret token), or the bot has no token.
    """
    options = receive_options(config)
    if options.mode != "webhook":
        return None
    return TelegramWebhook(config, sink, options)


def create_listener(config: BotConfig, sink: InboundSink) -> Listener:
    """The bot's long-lived task: webhook registration, or long polling.

    Raises:
        TelegramConfigError: as for :func:`create_webhook`.
    """
    require_token(config)
    options = receive_options(config)
    if options.mode == "webhook":
        return WebhookRegistration(config, sink, options)
    return PollingListener(config, sink)


__all__ = (
    "PLATFORM",
    "TelegramConfigError",
    "TelegramDeliverer",
    "create_listener",
    "create_webhook",
)
