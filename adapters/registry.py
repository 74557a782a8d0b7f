"""Which deliverer serves which platform; adapters are imported only when used."""

from __future__ import annotations

import importlib

from adapters.base import BotConfig, Deliverer

_DELIVERERS: dict[str, str] = {
    "webchat": "adapters.webchat:WebchatDeliverer",
    "telegram": "adapters.telegram:TelegramDeliverer",
    "discord": "adapters.discord:DiscordDeliverer",
    "slack": "adapters.slack:SlackDeliverer",
}


def create_deliverer(config: BotConfig) -> Deliverer:
    """A new deliverer for the bot's platform.

    Raises:
        KeyError: no adapter is installed for the platform.
    """
    try:
        path = _DELIVERERS[config.platform]
    except KeyError:
        raise KeyError(f"no adapter for platform {config.platform!r}") from None
    module_name, _, attr = path.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    deliverer = factory(config)
    assert isinstance(deliverer, Deliverer)
    return deliverer


def platforms() -> list[str]:
    """The platforms Hubbub can deliver to."""
    return sorted(_DELIVERERS)
