"""Hand Telegram updates to the sink once each, whichever way they arrived.

Webhook and polling share this: both parse an ``Update``, skip one they handled already,
convert it and pass the message on. An update that fails to store is released again, so
Telegram's retry (or the next poll) can deliver it.
"""

from __future__ import annotations

import logging

from telegram import Update

from adapters.base import BotConfig, InboundSink
from adapters.telegram.dedupe import RecentUpdates
from adapters.telegram.inbound import BotIdentity, to_inbound

log = logging.getLogger(__name__)

ALLOWED_UPDATES: tuple[str, ...] = (Update.MESSAGE, Update.EDITED_MESSAGE)
"""The update kinds Hubbub asks Telegram for (bots are never told about deletions)."""


class UpdateReceiver:
    """Converts and forwards one bot's updates, dropping repeats."""

    def __init__(self, config: BotConfig, sink: InboundSink, identity: BotIdentity) -> None:
        self.config = config
        self.identity = identity
        self._sink = sink
        self._recent = RecentUpdates()

    async def receive(self, update: Update) -> bool:
        """Forward ``update`` unless it is a repeat or unreadable; ``False`` when skipped.

        Raises:
            Exception: whatever the sink raised (storage unavailable); the update may be
                delivered again and will then be handled.
        """
        if not self._recent.begin(update.update_id):
            log.debug("repeated Telegram update dropped", extra={"update_id": update.update_id})
            return False
        try:
            inbound = to_inbound(update, self.identity, self.config)
        except Exception:
            # A malformed update fails the same way every time: skip it rather than have
            # Telegram (or the poller) retry it forever.
            log.exception("Telegram update could not be read; skipped", extra=self._extra(update))
            self._recent.finish(update.update_id)
            return False
        try:
            if inbound is not None:
                await self._sink(inbound)
        except BaseException:
            self._recent.abandon(update.update_id)
            raise
        self._recent.finish(update.update_id)
        return True

    def _extra(self, update: Update) -> dict[str, object]:
        return {"bot": self.config.bot_name, "update_id": update.update_id}
