"""The built-in web chat: replies are read from the database by the page, so delivery is local."""

from adapters.webchat.deliverer import WebchatDeliverer

PLATFORM = "webchat"

__all__ = ("PLATFORM", "WebchatDeliverer")
