"""Web chat delivery: the stored reply is what the page shows; sending tells its open pages."""

from __future__ import annotations

import asyncio

from adapters.base import BotConfig, Deliverer, DraftRecord
from adapters.messages import OutboundMessage
from adapters.webchat.feed import Feed, feed_for, message_event

FEED_URL = "feed_url"
"""The ``BotConfig.extra`` key of the deployment's Redis URL (none: the in-process feed)."""


class WebchatDeliverer(Deliverer):
    """Marks web chat replies delivered and tells the conversation's open pages."""

    local = True

    def __init__(self, config: BotConfig) -> None:
        super().__init__(config)
        self.feed: Feed = feed_for(config.extra.get(FEED_URL))
        """Where the page's event stream hears of replies and drafts."""

    async def deliver(
        self, message: OutboundMessage, drafts: DraftRecord | None = None
    ) -> list[str]:
        """The reply is stored already; its open pages are told, its receipt is the delivery id.

        Web chat records no drafts (a page's drafts are never stored): ``drafts`` is unused.

        Telling the pages is best effort (the feed never raises): a page that missed it
        reads the line at its next poll or reconnect.
        """
        if message.message_id is not None:
            event = message_event(message.message_id)
            await asyncio.to_thread(self.feed.publish, message.chat_id, event)
        return [f"webchat:{message.delivery_id}"]

    def publish_draft(self, chat_id: str, reply_to_message_id: int | str, text: str) -> None:
        """Show the reply to line ``reply_to_message_id`` of ``chat_id`` as it is so far.

        For a streaming turn: ``text`` is the whole reply so far; the delivered reply
        replaces it on the page. Thread-safe and best effort, like :meth:`Feed.publish`.
        """
        self.feed.publish_draft(chat_id, reply_to_message_id, text)

    def watched(self, chat_id: str) -> bool:
        """Whether a page listens to ``chat_id`` now (:meth:`Feed.watched`)."""
        return self.feed.watched(chat_id)

    async def shutdown(self) -> None:
        """Close the feed's connections."""
        await self.feed.aclose()
