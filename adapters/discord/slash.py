"""Discord application (slash) commands: the chat commands people reach from Discord's menu.

``/new``, ``/compress [focus]``, ``/usage``, ``/memory``, ``/forget [text]``, ``/stop``,
``/model [name]`` and ``/help``.

They are registered with one bulk overwrite (``PUT /applications/{id}/commands``) when
the listener starts. An interaction must be answered within three seconds, long before a
turn could finish, so it is acknowledged at once with a short public message ("Working on
`/usage`…", under Discord's "Ann used /usage" header) and handed to the sink like a typed
command. The answer then arrives through normal delivery as a message in the same
channel or thread: exactly once, from the outbox, like every other reply. The command is
stored under ``interaction:<id>`` (see :mod:`adapters.discord.ids`), so the answer is a
plain channel message rather than a reply to a message that does not exist.
"""

from __future__ import annotations

import functools
import logging

import discord
from discord import app_commands

from adapters.base import BotConfig
from adapters.discord.channels import locate
from adapters.discord.errors import SEND_FAILURES
from adapters.discord.ids import interaction_message_id
from adapters.discord.inbound import PLATFORM, Location
from adapters.discord.receiver import Receiver
from adapters.messages import InboundMessage

log = logging.getLogger(__name__)


ACK_TEXT = "Working on `/{command}`\u2026"
NOT_ALLOWED_TEXT = "Sorry, this bot does not take commands from you here."
FAILED_TEXT = "Sorry, `/{command}` could not be queued. Please try again in a moment."
DESCRIPTIONS = {
    "new": "Start a fresh session (the old conversation is kept)",
    "compress": "Summarise the conversation so far to free up context",
    "usage": "Show how much of the model's context window is in use",
    "memory": "What I remember about you in this chat",
    "forget": "Forget what I remember about you here",
    "stop": "Stop the reply I am writing now",
    "model": "List the models, or switch this chat to one",
    "help": "List the commands",
}
FOCUS_DESCRIPTION = "What the summary should keep in most detail (optional)"
MODEL_NAME_DESCRIPTION = "The model to switch this chat to (leave out to list them)"
FORGET_TEXT_DESCRIPTION = "Forget only what contains this text (leave out to forget all)"


class SlashCommands:
    """The bot's slash commands, wired to a :class:`Receiver`."""

    def __init__(self, config: BotConfig, receiver: Receiver) -> None:
        self._config = config
        self._receiver = receiver

    def install(self, tree: app_commands.CommandTree[discord.Client]) -> None:
        """Add the commands to ``tree`` (registered with Discord by ``tree.sync()``)."""

        @tree.command(name="new", description=DESCRIPTIONS["new"])
        async def new(interaction: discord.Interaction) -> None:
            await self.invoke(interaction, "new", "")

        @tree.command(name="compress", description=DESCRIPTIONS["compress"])
        @app_commands.describe(focus=FOCUS_DESCRIPTION)
        async def compress(interaction: discord.Interaction, focus: str | None = None) -> None:
            await self.invoke(interaction, "compress", (focus or "").strip())

        @tree.command(name="usage", description=DESCRIPTIONS["usage"])
        async def usage(interaction: discord.Interaction) -> None:
            await self.invoke(interaction, "usage", "")

        @tree.command(name="memory", description=DESCRIPTIONS["memory"])
        async def memory(interaction: discord.Interaction) -> None:
            await self.invoke(interaction, "memory", "")

        @tree.command(name="forget", description=DESCRIPTIONS["forget"])
        @app_commands.describe(text=FORGET_TEXT_DESCRIPTION)
        async def forget(interaction: discord.Interaction, text: str | None = None) -> None:
            await self.invoke(interaction, "forget", (text or "").strip())

        @tree.command(name="stop", description=DESCRIPTIONS["stop"])
        async def stop(interaction: discord.Interaction) -> None:
            await self.invoke(interaction, "stop", "")

        @tree.command(name="model", description=DESCRIPTIONS["model"])
        @app_commands.describe(name=MODEL_NAME_DESCRIPTION)
        async def model(interaction: discord.Interaction, name: str | None = None) -> None:
            await self.invoke(interaction, "model", (name or "").strip())

        @tree.command(name="help", description=DESCRIPTIONS["help"])
        async def help_(interaction: discord.Interaction) -> None:
            await self.invoke(interaction, "help", "")

    async def invoke(self, interaction: discord.Interaction, command: str, args: str) -> None:
        """Acknowledge the interaction now, then queue the command for the sink."""
        known = locate(interaction.channel) if interaction.channel is not None else None
        chat_id = known.chat_id if known is not None else str(interaction.channel_id)
        if not (await self._config.allowlist()).allows(str(interaction.user.id), chat_id):
            await self._respond(interaction, NOT_ALLOWED_TEXT, ephemeral=True)
            return
        ack_id = await self._respond(interaction, ACK_TEXT.format(command=command))
        self._receiver.enqueue(
            functools.partial(self._hand_over, interaction, command, args, ack_id)
        )

    async def _respond(
        self, interaction: discord.Interaction, text: str, *, ephemeral: bool = False
    ) -> int | None:
        try:
            callback = await interaction.response.send_message(text, ephemeral=ephemeral)
        except SEND_FAILURES:
            # Too late or refused: the command still runs and its answer still arrives.
            log.warning(
                "could not acknowledge a Discord interaction",
                extra={"interaction_id": interaction.id},
                exc_info=True,
            )
            return None
        return callback.message_id

    async def _hand_over(
        self, interaction: discord.Interaction, command: str, args: str, ack_id: int | None
    ) -> None:
        if interaction.channel_id is None:
            raise ValueError(f"interaction {interaction.id} came without a channel")
        location = await self._receiver.resolve(
            interaction.channel_id, guild_id=interaction.guild_id, channel=interaction.channel
        )
        try:
            await self._receiver.hand_over(
                command_message(
                    interaction,
                    command,
                    args,
                    config=self._config,
                    location=location,
                    ack_id=ack_id,
                )
            )
        except Exception:
            try:
                await interaction.edit_original_response(
                    content=FAILED_TEXT.format(command=command)
                )
            except SEND_FAILURES:
                log.debug("could not report a failed Discord command", exc_info=True)
            raise


def command_message(
    interaction: discord.Interaction,
    command: str,
    args: str,
    *,
    config: BotConfig,
    location: Location,
    ack_id: int | None = None,
) -> InboundMessage:
    """The ``InboundMessage`` for a slash command, as if the user had typed it."""
    meta = {"interaction_id": str(interaction.id)}
    if ack_id is not None:
        meta["ack_message_id"] = str(ack_id)
    if location.guild_id is not None:
        meta["guild_id"] = location.guild_id
    user = interaction.user
    return InboundMessage(
        platform=PLATFORM,
        bot_name=config.bot_name,
        tenant_id=config.tenant_id,
        chat_id=location.chat_id,
        chat_type=location.chat_type,
        thread_id=location.thread_id,
        message_id=interaction_message_id(interaction.id),
        sender_id=str(user.id),
        sender_name=user.display_name,
        sender_is_bot=user.bot,
        text=f"/{command} {args}".strip(),
        addressed=True,
        command=command,
        command_args=args,
        meta=meta,
    )
