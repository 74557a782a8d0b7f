"""Work out where a Discord message was posted: a DM, a guild channel, or a thread in one.

discord.py knows most channels from its cache (``GUILD_CREATE``, ``THREAD_CREATE``). A
thread it has not seen arrives as a bare :class:`discord.PartialMessageable`, which does
not say it is a thread nor what its parent is, so it is looked up once over REST
(``GET /channels/{id}``) and remembered.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Protocol

import aiohttp
import discord

from adapters.discord.inbound import Location

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
"""Channels remembered after a REST lookup."""
GUILD_CHANNEL_TYPES = frozenset(
    {
        discord.ChannelType.text,
        discord.ChannelType.news,
        discord.ChannelType.voice,
        discord.ChannelType.stage_voice,
        discord.ChannelType.forum,
        discord.ChannelType.media,
    }
)
"""Channel types whose messages are the channel's own, never a thread's."""


class ChannelSource(Protocol):
    """The part of :class:`discord.Client` the resolver uses."""

    def get_channel(self, id: int, /) -> object | None:  # noqa: D102 (discord.Client's)
        ...

    async def fetch_channel(self, channel_id: int, /) -> object:  # noqa: D102 (discord.Client's)
        ...


def locate(channel: object) -> Location | None:
    """Where a message in ``channel`` belongs; ``None`` when the channel must be looked up."""
    if isinstance(channel, discord.Thread):
        return Location(
            chat_id=str(channel.parent_id),
            chat_type="group",
            thread_id=str(channel.id),
            guild_id=str(channel.guild.id),
        )
    if isinstance(channel, discord.DMChannel):
        return Location(chat_id=str(channel.id), chat_type="private")
    if isinstance(channel, discord.GroupChannel):
        return Location(chat_id=str(channel.id), chat_type="group")
    if isinstance(channel, discord.abc.GuildChannel):
        return Location(chat_id=str(channel.id), chat_type="group", guild_id=str(channel.guild.id))
    if isinstance(channel, discord.PartialMessageable):
        if channel.guild_id is None:
            return Location(chat_id=str(channel.id), chat_type="private")
        if channel.type in GUILD_CHANNEL_TYPES:
            return Location(
                chat_id=str(channel.id), chat_type="group", guild_id=str(channel.guild_id)
            )
    return None


class ChannelResolver:
    """Locates channels from discord.py's cache, falling back to one REST lookup each."""

    def __init__(self, client: ChannelSource, *, cache_size: int = CACHE_SIZE) -> None:
        self._client = client
        self._looked_up: OrderedDict[int, Location] = OrderedDict()
        self._cache_size = cache_size

    async def resolve(
        self, channel_id: int, *, guild_id: int | None, channel: object | None = None
    ) -> Location:
        """Where a message in channel ``channel_id`` belongs.

        A channel that cannot be looked up (no access, network) is taken as a guild channel
        of its own, so the message is still recorded.
        """
        for candidate in (channel, self._client.get_channel(channel_id)):
            if candidate is not None and (found := locate(candidate)) is not None:
                return found
        if guild_id is None:
            return Location(chat_id=str(channel_id), chat_type="private")
        remembered = self._looked_up.get(channel_id)
        if remembered is not None:
            self._looked_up.move_to_end(channel_id)
            return remembered
        fallback = Location(chat_id=str(channel_id), chat_type="group", guild_id=str(guild_id))
        try:
            fetched = await self._client.fetch_channel(channel_id)
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError):
            log.warning(
                "could not look up a Discord channel; treating it as a channel, not a thread",
                extra={"channel_id": channel_id},
                exc_info=True,
            )
            return fallback
        found = locate(fetched) or fallback
        self._looked_up[channel_id] = found
        while len(self._looked_up) > self._cache_size:
            self._looked_up.popitem(last=False)
        return found
