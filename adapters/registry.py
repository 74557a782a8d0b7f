"""Which adapter serves which platform; adapters are imported only when used.

Each platform package exports a deliverer class and two factories:
``create_listener(config, sink) -> Listener | None`` (a long-lived connection, when the
bot's configuration calls for one) and ``create_webhook(config, sink) -> WebhookHandler |
None`` (when the platform pushes events over HTTP). Platforms people send images on have
a ``media`` module with their :class:`~adapters.media.MediaFetcher`.
"""

from __future__ import annotations

import importlib
from typing import Any

from adapters.base import BotConfig, Deliverer, InboundSink, Listener, WebhookHandler
from adapters.media import MediaFetcher

_PACKAGES: dict[str, str] = {
    "webchat": "adapters.webchat",
    "telegram": "adapters.telegram",
    "discord": "adapters.discord",
    "slack": "adapters.slack",
}
_DELIVERERS: dict[str, str] = {
    "webchat": "WebchatDeliverer",
    "telegram": "TelegramDeliverer",
    "discord": "DiscordDeliverer",
    "slack": "SlackDeliverer",
}


def _module(platform: str) -> Any:
    try:
        return importlib.import_module(_PACKAGES[platform])
    except KeyError:
        raise KeyError(f"no adapter for platform {platform!r}") from None


def create_deliverer(config: BotConfig) -> Deliverer:
    """A new deliverer for the bot's platform.

    Raises:
        KeyError: no adapter is installed for the platform.
    """
    deliverer = getattr(_module(config.platform), _DELIVERERS[config.platform])(config)
    assert isinstance(deliverer, Deliverer)
    return deliverer


_MEDIA_FETCHERS: dict[str, tuple[str, str]] = {
    "telegram": ("adapters.telegram.media", "TelegramMediaFetcher"),
    "discord": ("adapters.discord.media", "DiscordMediaFetcher"),
    "slack": ("adapters.slack.media", "SlackMediaFetcher"),
}


def create_media_fetcher(config: BotConfig, *, timeout: float) -> MediaFetcher | None:
    """The bot's image fetcher, or ``None`` when its platform sends no images (web chat)."""
    found = _MEDIA_FETCHERS.get(config.platform)
    if found is None:
        return None
    module, name = found
    fetcher = getattr(importlib.import_module(module), name)(config, timeout=timeout)
    assert isinstance(fetcher, MediaFetcher)
    return fetcher


def create_listener(config: BotConfig, sink: InboundSink) -> Listener | None:
    """The bot's long-lived connection, or ``None`` when its platform pushes to webhooks."""
    factory = getattr(_module(config.platform), "create_listener", None)
    return factory(config, sink) if factory is not None else None


def create_webhook(config: BotConfig, sink: InboundSink) -> WebhookHandler | None:
    """The bot's webhook handler, or ``None`` when it receives over a connection."""
    factory = getattr(_module(config.platform), "create_webhook", None)
    return factory(config, sink) if factory is not None else None


def platforms() -> list[str]:
    """The platforms Hubbub has adapters for."""
    return sorted(_PACKAGES)
