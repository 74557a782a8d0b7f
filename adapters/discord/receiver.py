"""Hand what the Discord gateway delivers to Hubbub's sink, one event at a time, in order.

discord.py parses events as they arrive but runs ``on_*`` handlers later, as tasks, and
updates cached messages in place when they are edited. So the listener calls the receiver
from inside the parser: each event is converted right away, in arrival order, and queued;
a single consumer hands the results to the sink one after the other, including any
channel lookup a message still needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

import discord

from adapters.base import BotConfig, InboundSink
from adapters.discord.channels import ChannelResolver, locate
from adapters.discord.inbound import (
    Location,
    Me,
    RecentIds,
    deletion,
    relocated,
    to_inbound,
)
from adapters.messages import EventKind, InboundMessage

log = logging.getLogger(__name__)

OWN_MESSAGE_MEMORY = 4096
"""How many of the bot's own message ids are remembered for reply detection."""
DRAIN_SECONDS = 5.0
"""How long a stopping listener waits for queued events to reach the sink."""

Job = Callable[[], Awaitable[None]]


class Receiver:
    """Converts gateway events for one bot and feeds them to the sink in arrival order."""

    def __init__(
        self, config: BotConfig, sink: InboundSink, resolver: ChannelResolver, bot_user_id: int
    ) -> None:
        self._config = config
        self._sink = sink
        self._resolver = resolver
        self._bot_user_id = bot_user_id
        self._own_ids = RecentIds(OWN_MESSAGE_MEMORY)
        self._queue: asyncio.Queue[Job] = asyncio.Queue()

    @property
    def me(self) -> Me:
        """Our bot, as addressing checks see it."""
        return Me(user_id=self._bot_user_id, own_message_ids=self._own_ids)

    def set_bot_user(self, user_id: int) -> None:
        """Learn the bot's user id (known once logged in)."""
        self._bot_user_id = user_id

    def message(self, message: discord.Message) -> None:
        """A new message: queue it (the bot's own are only remembered, never sunk)."""
        if message.author.id == self._bot_user_id:
            self._own_ids.add(message.id)
            return
        self._convert(message, "message")

    def edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """An edited message (cached or not): queue its new text.

        Updates without an edit time are Discord filling in link previews, not edits.
        """
        if payload.message.author.id == self._bot_user_id or payload.message.edited_at is None:
            return
        self._convert(payload.message, "edit")

    def delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        """A deleted message (cached or not): queue its removal from the transcript."""
        author = payload.cached_message.author if payload.cached_message is not None else None
        if author is not None and author.id == self._bot_user_id:
            return
        self.enqueue(
            lambda: self._delete(payload.message_id, payload.channel_id, payload.guild_id, author)
        )

    def bulk_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        """Messages deleted together (moderation): queue each removal."""
        authors = {m.id: m.author for m in payload.cached_messages}
        for message_id in sorted(payload.message_ids):
            author = authors.get(message_id)
            if author is not None and author.id == self._bot_user_id:
                continue
            self.enqueue(
                functools.partial(
                    self._delete, message_id, payload.channel_id, payload.guild_id, author
                )
            )

    def enqueue(self, job: Job) -> None:
        """Run ``job`` after everything queued before it."""
        self._queue.put_nowait(job)

    async def consume(self) -> None:
        """Run queued jobs one at a time until cancelled; a failing job is logged and skipped."""
        while True:
            job = await self._queue.get()
            try:
                await job()
            except Exception:
                log.exception("a Discord event could not be handed over")
            finally:
                self._queue.task_done()

    async def drain(self, grace_seconds: float = DRAIN_SECONDS) -> None:
        """Wait (bounded) until everything queued so far has been handed over."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_seconds):
                await self._queue.join()
        if not self._queue.empty():
            log.warning("Discord events dropped at shutdown", extra={"count": self._queue.qsize()})

    async def hand_over(self, inbound: InboundMessage) -> None:
        """Give one message to the sink."""
        await self._sink(inbound)

    async def resolve(
        self, channel_id: int, *, guild_id: int | None, channel: object | None = None
    ) -> Location:
        """Where a message in ``channel_id`` belongs (see :class:`ChannelResolver`)."""
        return await self._resolver.resolve(channel_id, guild_id=guild_id, channel=channel)

    def _convert(self, message: discord.Message, event: EventKind) -> None:
        # Convert now: discord.py updates cached Message objects in place when they are
        # edited, so a queued message must not be read later.
        guild_id = message.guild.id if message.guild is not None else _guild_id(message)
        known = locate(message.channel)
        location = known or Location(
            chat_id=str(message.channel.id),
            chat_type="private" if guild_id is None else "group",
            guild_id=str(guild_id) if guild_id is not None else None,
        )
        inbound = to_inbound(
            message, config=self._config, me=self.me, location=location, event=event
        )
        if inbound is None:
            return
        if known is not None:
            self.enqueue(functools.partial(self.hand_over, inbound))
        else:
            self.enqueue(
                functools.partial(self._locate_and_hand_over, inbound, message.channel.id, guild_id)
            )

    async def _locate_and_hand_over(
        self, inbound: InboundMessage, channel_id: int, guild_id: int | None
    ) -> None:
        location = await self.resolve(channel_id, guild_id=guild_id)
        await self.hand_over(relocated(inbound, location))

    async def _delete(
        self,
        message_id: int,
        channel_id: int,
        guild_id: int | None,
        author: discord.abc.User | None,
    ) -> None:
        location = await self.resolve(channel_id, guild_id=guild_id)
        await self.hand_over(
            deletion(
                message_id,
                config=self._config,
                location=location,
                channel_id=channel_id,
                author=author,
            )
        )


def _guild_id(message: discord.Message) -> int | None:
    channel = message.channel
    if isinstance(channel, discord.PartialMessageable):
        return channel.guild_id
    return None
