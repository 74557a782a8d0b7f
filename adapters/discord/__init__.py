"""Discord: the gateway connection in, REST replies out, through discord.py.

The gateway process runs a :class:`DiscordListener` per bot (Discord pushes events over
its WebSocket gateway, so there is no webhook); workers deliver replies with a
:class:`DiscordDeliverer`, which only uses the REST API.
"""

from __future__ import annotations

from adapters.base import BotConfig, InboundSink, Listener, WebhookHandler
from adapters.discord.deliverer import DiscordDeliverer
from adapters.discord.inbound import PLATFORM
from adapters.discord.listener import DiscordListener


def create_listener(config: BotConfig, sink: InboundSink) -> Listener | None:
    """The bot's gateway connection.

    Raises:
        ValueError: the bot has no token.
        EndpointConfigError: ``api_base`` is not an http(s) URL.
    """
    return DiscordListener(config, sink)


def create_webhook(config: BotConfig, sink: InboundSink) -> WebhookHandler | None:
    """``None``: Discord pushes messages over the gateway, not to webhooks."""
    return None


__all__ = (
    "PLATFORM",
    "DiscordDeliverer",
    "DiscordListener",
    "create_listener",
    "create_webhook",
)
