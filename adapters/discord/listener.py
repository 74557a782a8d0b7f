"""The Discord gateway connection of one bot: receives messages, edits, deletes, commands.

A ``discord.Client`` with the guilds, guild messages, direct messages and message content
intents. discord.py keeps the connection up by itself (heartbeats, RESUME after a drop,
a fresh IDENTIFY when Discord invalidates the session); the gateway supervisor restarts
:meth:`DiscordListener.run` with back-off only when the client gives up (bad token,
intents not enabled, login unreachable).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import discord
from discord import app_commands

from adapters.base import BotConfig, InboundSink, Listener
from adapters.discord.channels import ChannelResolver
from adapters.discord.endpoints import rest_base_for, use_api_base, use_gateway
from adapters.discord.errors import DiscordListenerError
from adapters.discord.receiver import Receiver
from adapters.discord.slash import SlashCommands

log = logging.getLogger(__name__)

MESSAGE_CACHE_SIZE = 1000
"""Messages discord.py keeps, so edits and deletes of recent ones know their author."""
MESSAGE_CONTENT_HINT = (
    "Discord refused the Message Content intent: enable it for the bot under "
    "Developer Portal > Bot > Privileged Gateway Intents"
)


def gateway_intents() -> discord.Intents:
    """What the bot subscribes to: guilds and channels, guild and DM messages, their text."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    return intents


class GatewayClient(discord.Client):
    """A ``discord.Client`` whose events go to a :class:`Receiver`."""

    def __init__(self, config: BotConfig, sink: InboundSink, *, discover_gateway: bool) -> None:
        super().__init__(
            intents=gateway_intents(),
            max_messages=MESSAGE_CACHE_SIZE,
            chunk_guilds_at_startup=False,
        )
        self.resolver = ChannelResolver(self)
        self.receiver = Receiver(config, sink, self.resolver, bot_user_id=0)
        self.tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(self)
        SlashCommands(config, self.receiver).install(self.tree)
        self._discover_gateway = discover_gateway

    async def setup_hook(self) -> None:
        """After login, before connecting: learn who we are, find the gateway, sync commands."""
        assert self.user is not None
        self.receiver.set_bot_user(self.user.id)
        if self._discover_gateway:
            _shards, url, _limits = await self.http.get_bot_gateway()
            use_gateway(url)
        await self._register_commands()

    async def _register_commands(self) -> None:
        try:
            commands = await self.tree.sync()
        except (discord.HTTPException, app_commands.AppCommandError):
            log.warning(
                "could not register Discord slash commands; plain-text commands still work "
                "(invite the bot with the applications.commands scope)",
                exc_info=True,
            )
            return
        log.info(
            "Discord slash commands registered", extra={"commands": [c.name for c in commands]}
        )

    async def on_ready(self) -> None:
        """Log the (re)identified session."""
        log.info(
            "Discord gateway ready",
            extra={"bot_user_id": self.user.id if self.user else None, "guilds": len(self.guilds)},
        )

    async def on_resumed(self) -> None:
        """Log a resumed session (missed events are replayed by Discord)."""
        log.info("Discord gateway session resumed")

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        """Hand message events to the receiver, then dispatch as usual.

        This runs inside discord.py's parser, in arrival order and before the next event
        can change cached messages; ``on_message`` handlers would run later, as tasks.
        """
        try:
            if event == "message":
                self.receiver.message(args[0])
            elif event == "raw_message_edit":
                self.receiver.edit(args[0])
            elif event == "raw_message_delete":
                self.receiver.delete(args[0])
            elif event == "raw_bulk_message_delete":
                self.receiver.bulk_delete(args[0])
        except Exception:
            log.exception("a Discord event could not be converted", extra={"event": event})
        super().dispatch(event, *args, **kwargs)


class DiscordListener(Listener):
    """Runs one bot's gateway client until cancelled.

    Raises:
        ValueError: the configuration has no token.
        EndpointConfigError: ``api_base`` is not an http(s) URL.
    """

    def __init__(self, config: BotConfig, sink: InboundSink) -> None:
        super().__init__(config, sink)
        if not config.token:
            raise ValueError("a Discord bot needs a token (HUBBUB_DISCORD_TOKEN)")
        self._token = config.token
        rest_base_for(config.api_base)
        self.client: GatewayClient | None = None
        """The running client (for inspection); replaced on every run."""

    async def run(self) -> None:
        """Connect and receive until cancelled; closes the client on the way out.

        Raises:
            DiscordListenerError: the token or the intents were refused, or the connection
                ended on its own; the supervisor restarts the listener after a back-off.
        """
        endpoints = use_api_base(self.config.api_base)
        client = GatewayClient(self.config, self.sink, discover_gateway=endpoints.custom)
        self.client = client
        consumer = asyncio.create_task(client.receiver.consume())
        try:
            await client.start(self._token, reconnect=True)
        except discord.LoginFailure as exc:
            raise DiscordListenerError(
                "Discord rejected the bot token (HUBBUB_DISCORD_TOKEN)"
            ) from exc
        except discord.PrivilegedIntentsRequired as exc:
            raise DiscordListenerError(MESSAGE_CONTENT_HINT) from exc
        finally:
            await client.close()
            await client.receiver.drain()
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
        raise DiscordListenerError("the Discord gateway connection ended")
