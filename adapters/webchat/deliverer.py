"""Web chat delivery: the stored reply is what the page shows, so sending is a receipt."""

from __future__ import annotations

from adapters.base import Deliverer
from adapters.messages import OutboundMessage


class WebchatDeliverer(Deliverer):
    """Marks web chat replies delivered; the page lists them from the API."""

    local = True

    async def deliver(self, message: OutboundMessage) -> list[str]:
        """The reply is visible already; its receipt is the delivery id."""
        return [f"webchat:{message.delivery_id}"]
