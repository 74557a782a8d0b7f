"""Turn discord.py messages and events into Hubbub's ``InboundMessage``.

Pure functions over objects discord.py has already parsed; where the message was posted
(:class:`Location`) is worked out beforehand by :mod:`adapters.discord.channels`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Container
from dataclasses import dataclass

import discord

from adapters.base import BotConfig
from adapters.commands import parse_command
from adapters.messages import ChatType, EventKind, InboundImage, InboundMessage

PLATFORM = "discord"
CONVERSATION_TYPES = frozenset(
    {
        discord.MessageType.default,
        discord.MessageType.reply,
        discord.MessageType.chat_input_command,
        discord.MessageType.context_menu_command,
    }
)
"""Messages people (and other bots' commands) write; joins, pins, thread notices and the
like are not conversation."""
_LEADING_MENTION = re.compile(r"^\s*<@[!&]?(?P<id>\d+)>\s*")


@dataclass(frozen=True, slots=True)
class Location:
    """Where a message was posted, as Hubbub's sessions see it."""

    chat_id: str
    """The DM channel, or the guild text channel (a thread's parent)."""
    chat_type: ChatType
    thread_id: str = ""
    """The thread, when the message is in one: its own session."""
    guild_id: str | None = None


@dataclass(frozen=True, slots=True)
class Me:
    """What addressing checks need to know about our bot."""

    user_id: int
    own_message_ids: Container[int] = frozenset()
    """Recently seen ids of the bot's own messages (when a reply's target is not included)."""


class RecentIds:
    """The last ``size`` ids added, for membership tests."""

    def __init__(self, size: int) -> None:
        self._order: deque[int] = deque()
        self._ids: set[int] = set()
        self._size = size

    def add(self, value: int) -> None:
        """Remember ``value``, forgetting the oldest beyond ``size``."""
        if value in self._ids:
            return
        self._order.append(value)
        self._ids.add(value)
        while len(self._order) > self._size:
            self._ids.discard(self._order.popleft())

    def __contains__(self, value: object) -> bool:
        return value in self._ids


def bot_role_id(guild: discord.Guild | None, bot_user_id: int) -> int | None:
    """The id of the role Discord manages for our bot in ``guild``, if it has one."""
    if guild is None:
        return None
    for role in guild.roles:
        if role.tags is not None and role.tags.bot_id == bot_user_id:
            return role.id
    return None


def is_addressed(message: discord.Message, me: Me, location: Location) -> bool:
    """DMs, mentions of the bot or its role, and replies to its messages address it."""
    if location.chat_type == "private":
        return True
    if any(user.id == me.user_id for user in message.mentions):
        return True
    role = bot_role_id(message.guild, me.user_id)
    if role is not None and role in message.raw_role_mentions:
        return True
    return replies_to_bot(message, me)


def replies_to_bot(message: discord.Message, me: Me) -> bool:
    """Whether ``message`` is a reply to one of the bot's messages."""
    reference = message.reference
    if reference is None or reference.message_id is None or _is_forward(reference):
        return False
    resolved = reference.resolved or reference.cached_message
    if isinstance(resolved, discord.Message):
        return resolved.author.id == me.user_id
    return reference.message_id in me.own_message_ids


def is_image(attachment: discord.Attachment) -> bool:
    """Whether Discord says the attachment is an image (the bytes are checked when fetched)."""
    return (attachment.content_type or "").startswith("image/")


def message_images(message: discord.Message) -> tuple[InboundImage, ...]:
    """The message's image attachments, fetched later from their URLs."""
    return tuple(
        InboundImage(
            ref=attachment.url,
            filename=attachment.filename,
            size=attachment.size,
            width=attachment.width,
            height=attachment.height,
        )
        for attachment in message.attachments
        if is_image(attachment)
    )


def message_text(message: discord.Message) -> str:
    """What the person said: mentions shown by name, other attachments and stickers named.

    Image attachments travel as images (:func:`message_images`), not as names.
    """
    parts = [message.clean_content] if message.content.strip() else []
    parts += [
        f"[attachment: {attachment.filename}]"
        for attachment in message.attachments
        if not is_image(attachment)
    ]
    parts += [f"[sticker: {sticker.name}]" for sticker in message.stickers]
    return "\n".join(parts)


def command_of(message: discord.Message, me: Me) -> tuple[str, str] | None:
    """``(name, args)`` for a plain-text command such as ``/compress auth`` or ``@bot /new``."""
    text = message.content
    role = bot_role_id(message.guild, me.user_id)
    mention = _LEADING_MENTION.match(text)
    if mention is not None and int(mention.group("id")) in (me.user_id, role):
        text = text[mention.end() :]
    return parse_command(text)


def to_inbound(
    message: discord.Message,
    *,
    config: BotConfig,
    me: Me,
    location: Location,
    event: EventKind = "message",
) -> InboundMessage | None:
    """The ``InboundMessage`` for a new or edited message; ``None`` when it is not for us.

    Not for us: the bot's own messages, system messages (joins, pins, thread notices) and
    messages with nothing to read.
    """
    if message.author.id == me.user_id or message.type not in CONVERSATION_TYPES:
        return None
    text = message_text(message)
    images = message_images(message) if event == "message" else ()
    if not text.strip() and not images:
        return None
    command = command_of(message, me)
    reference = message.reference
    reply_to = None
    if reference is not None and reference.message_id is not None and not _is_forward(reference):
        reply_to = str(reference.message_id)
    return InboundMessage(
        platform=PLATFORM,
        bot_name=config.bot_name,
        tenant_id=config.tenant_id,
        chat_id=location.chat_id,
        chat_type=location.chat_type,
        thread_id=location.thread_id,
        message_id=str(message.id),
        sender_id=str(message.author.id),
        sender_name=message.author.display_name,
        sender_is_bot=message.author.bot,
        text=text,
        addressed=is_addressed(message, me, location),
        command=command[0] if command else None,
        command_args=command[1] if command else "",
        reply_to_message_id=reply_to,
        event=event,
        meta=_meta(location, message.channel.id),
        images=images,
    )


def deletion(
    message_id: int,
    *,
    config: BotConfig,
    location: Location,
    channel_id: int,
    author: discord.abc.User | None = None,
) -> InboundMessage:
    """The ``InboundMessage`` that removes a deleted message from the transcript."""
    return InboundMessage(
        platform=PLATFORM,
        bot_name=config.bot_name,
        tenant_id=config.tenant_id,
        chat_id=location.chat_id,
        chat_type=location.chat_type,
        thread_id=location.thread_id,
        message_id=str(message_id),
        sender_id=str(author.id) if author is not None else None,
        sender_name=author.display_name if author is not None else None,
        sender_is_bot=author.bot if author is not None else False,
        text="",
        event="delete",
        meta=_meta(location, channel_id),
    )


def relocated(inbound: InboundMessage, location: Location) -> InboundMessage:
    """``inbound`` moved to ``location`` (once a channel lookup said where it was posted)."""
    meta = {**inbound.meta, **_meta(location, int(inbound.meta["channel_id"]))}
    return inbound.model_copy(
        update={
            "chat_id": location.chat_id,
            "chat_type": location.chat_type,
            "thread_id": location.thread_id,
            "meta": meta,
        }
    )


def _meta(location: Location, channel_id: int) -> dict[str, str]:
    meta = {"channel_id": str(channel_id)}
    if location.guild_id is not None:
        meta["guild_id"] = location.guild_id
    return meta


def _is_forward(reference: discord.MessageReference) -> bool:
    return reference.type == discord.MessageReferenceType.forward
