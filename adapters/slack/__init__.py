"""Slack: the Events API (``/webhooks/slack/{bot_id}``) or Socket Mode in, ``chat.postMessage`` out.

A bot with an app-level token (``HUBBUB_SLACK_APP_TOKEN``) receives over Socket Mode and
serves no webhook; otherwise its signing secret (``HUBBUB_SLACK_SIGNING_SECRET``) enables
the Events API and slash commands at its webhook URL.
"""

from __future__ import annotations

from adapters.base import BotConfig, InboundSink, Listener, WebhookHandler
from adapters.slack.deliverer import SlackDeliverer
from adapters.slack.events import PLATFORM
from adapters.slack.settings import ReceiveMode, SlackSettings
from adapters.slack.socket_mode import SlackSocketModeListener
from adapters.slack.webhook import SlackWebhookHandler


def create_webhook(config: BotConfig, sink: InboundSink) -> WebhookHandler | None:
    """The Events API handler, unless the bot uses Socket Mode.

    Raises:
        ValueError: the bot has neither a signing secret nor an app-level token, so it
            could never receive anything.
    """
    settings = SlackSettings.from_config(config)
    mode = settings.receive_mode
    if mode is None:
        raise ValueError(
            f"Slack bot {config.bot_name!r} needs a signing secret (Events API, "
            "HUBBUB_SLACK_SIGNING_SECRET) or an app-level token (Socket Mode, "
            "HUBBUB_SLACK_APP_TOKEN) to receive messages"
        )
    if mode is not ReceiveMode.EVENTS_API:
        return None
    return SlackWebhookHandler(config, sink, settings=settings)


def create_listener(config: BotConfig, sink: InboundSink) -> Listener | None:
    """The Socket Mode listener when the bot has an app-level token, else ``None``."""
    settings = SlackSettings.from_config(config)
    if settings.receive_mode is not ReceiveMode.SOCKET_MODE:
        return None
    return SlackSocketModeListener(config, sink, settings=settings)


__all__ = (
    "PLATFORM",
    "SlackDeliverer",
    "SlackSocketModeListener",
    "SlackWebhookHandler",
    "create_listener",
    "create_webhook",
)
