"""Turn Telegram updates into Hubbub's platform-free ``InboundMessage``.

What a message means for the pipeline is decided here: which session it belongs to (a
private chat, a group, or a forum topic of its own), whether it addresses the bot (a DM, an
``@mention``, a reply to one of the bot's messages, ``/command@bot``), whether it is a
command, who said it, whether that speaker is a bot, and the text the model reads (a text
link shows where it points). Gating itself (which messages get a turn) happens
downstream; unaddressed group messages are still passed on as context.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from telegram import Chat, Message, MessageEntity, PhotoSize, Update, User

from adapters.base import BotConfig
from adapters.commands import parse_command
from adapters.messages import ChatType, EventKind, InboundImage, InboundMessage
from adapters.telegram.ids import compose_message_id
from adapters.telegram.options import PLATFORM

log = logging.getLogger(__name__)

COMMAND_ALIASES = {"start": "help"}
"""Telegram clients send ``/start`` when a user opens a bot; greet them with the help text."""
_GROUP_TYPES = (Chat.GROUP, Chat.SUPERGROUP)
_MENTIONS: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
_LINKS: list[str | None] = [MessageEntity.TEXT_LINK]
PHOTO_NAME = "photo.jpg"
"""Telegram photos have no file name; they are always JPEG."""


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is on Telegram (from ``getMe``): needed to tell when it is addressed."""

    id: int
    username: str

    @classmethod
    def from_user(cls, user: User) -> BotIdentity:
        """The identity of the ``getMe`` result."""
        return cls(id=user.id, username=user.username or "")


def to_inbound(update: Update, bot: BotIdentity, config: BotConfig) -> InboundMessage | None:
    """The message an update carries, or ``None`` when it carries nothing for Hubbub.

    Ignored: update kinds other than new and edited messages, channels, messages without
    text, caption or image (stickers, service messages), and the bot's own messages. A
    photo (the largest size under the image cap) or an image sent as a file is carried
    as an :class:`InboundImage`; its caption is the text.
    """
    if update.message is not None:
        message, event = update.message, "message"
    elif update.edited_message is not None:
        message, event = update.edited_message, "edit"
    else:
        return None
    chat = message.chat
    if chat.type not in (Chat.PRIVATE, *_GROUP_TYPES):
        return None
    text, entities = _text(message)
    images = _images(message, config.image_max_bytes) if event == "message" else ()
    if not text.strip() and not images:
        return None
    shown = _with_link_targets(text, _links(message))
    sender_id, sender_name, sender_is_bot = _sender(message)
    if message.from_user is not None and message.from_user.id == bot.id:
        return None
    chat_type: ChatType = "private" if chat.type == Chat.PRIVATE else "group"
    command = parse_command(text, bot_username=bot.username or None)
    name, args = command if command is not None else (None, "")
    replied = _replied_to(message)
    addressed = (
        chat_type == "private"
        or _mentions(entities, bot)
        or (
            replied is not None and replied.from_user is not None and replied.from_user.id == bot.id
        )
        or (command is not None and _targets(text, bot))
    )
    kind: EventKind = "edit" if event == "edit" else "message"
    return InboundMessage(
        platform=PLATFORM,
        bot_name=config.bot_name,
        tenant_id=config.tenant_id,
        chat_id=str(chat.id),
        chat_type=chat_type,
        thread_id=str(message.message_thread_id) if _in_topic(message) else "",
        message_id=compose_message_id(chat.id, message.message_id),
        sender_id=sender_id,
        sender_name=sender_name,
        sender_is_bot=sender_is_bot,
        text=shown,
        addressed=addressed,
        command=COMMAND_ALIASES.get(name, name) if name is not None else None,
        command_args=args,
        reply_to_message_id=(
            compose_message_id(chat.id, replied.message_id) if replied is not None else None
        ),
        event=kind,
        meta={"update_id": update.update_id},
        images=images,
    )


def _images(message: Message, max_bytes: int | None) -> tuple[InboundImage, ...]:
    """The photo or image file ``message`` carries (Telegram sends at most one per message)."""
    if message.photo:
        size = _photo_size(message.photo, max_bytes)
        return (
            InboundImage(
                ref=size.file_id,
                filename=PHOTO_NAME,
                size=size.file_size,
                width=size.width,
                height=size.height,
            ),
        )
    document = message.document
    if document is not None and (document.mime_type or "").startswith("image/"):
        return (
            InboundImage(
                ref=document.file_id,
                filename=document.file_name or "image",
                size=document.file_size,
            ),
        )
    return ()


def _photo_size(sizes: tuple[PhotoSize, ...], max_bytes: int | None) -> PhotoSize:
    """The largest of a photo's sizes under the cap; the largest of all when none is.

    Telegram sends each photo in several sizes (thumbnail to original). A size without
    ``file_size`` counts as fitting; one too large for every cap is refused when fetched.
    """
    by_area = sorted(sizes, key=lambda s: s.width * s.height)
    fitting = [
        s for s in by_area if max_bytes is None or s.file_size is None or s.file_size <= max_bytes
    ]
    return (fitting or by_area)[-1]


def _text(message: Message) -> tuple[str, dict[MessageEntity, str]]:
    if isinstance(message.text, str):
        return message.text, message.parse_entities(_MENTIONS)
    if isinstance(message.caption, str):
        return message.caption, message.parse_caption_entities(_MENTIONS)
    return "", {}


def _links(message: Message) -> dict[MessageEntity, str]:
    if isinstance(message.text, str):
        return message.parse_entities(_LINKS)
    return message.parse_caption_entities(_LINKS)


def _with_link_targets(text: str, links: dict[MessageEntity, str]) -> str:
    """``text`` with each ``text_link``'s URL after its label: ``runbook (https://…)``.

    Telegram keeps a text link's target outside the text, so without this the model never
    sees where a link points. A label that already is its URL is left alone. Offsets are
    UTF-16 code units, so the text is cut in that encoding.
    """
    units = text.encode("utf-16-le", "surrogatepass")
    out: list[str] = []
    position = 0
    for entity, label in sorted(links.items(), key=lambda item: item[0].offset):
        url = entity.url
        if not url or url.rstrip("/") == label.strip().rstrip("/"):
            continue
        end = 2 * (entity.offset + entity.length)
        out.append(units[position:end].decode("utf-16-le", "surrogatepass"))
        out.append(f" ({url})")
        position = end
    out.append(units[position:].decode("utf-16-le", "surrogatepass"))
    return "".join(out)


def _sender(message: Message) -> tuple[str | None, str | None, bool]:
    """``(id, display name, is a bot)`` of whoever sent ``message``.

    Anonymous group admins and linked channels post as a chat (``sender_chat``); their
    ``from`` is a placeholder bot account, so the chat is the speaker and not a bot.
    """
    if message.sender_chat is not None:
        sender = message.sender_chat
        return str(sender.id), sender.title or sender.effective_name, False
    user = message.from_user
    if user is None:
        return None, None, False
    name = user.full_name.strip() or (f"@{user.username}" if user.username else str(user.id))
    return str(user.id), name, user.is_bot


def _in_topic(message: Message) -> bool:
    return bool(message.is_topic_message) and message.message_thread_id is not None


def _replied_to(message: Message) -> Message | None:
    """The message this one answers, if the user chose one.

    In a forum topic every message carries the topic's opening service message as
    ``reply_to_message``; that is not a reply (and the bot may have opened the topic).
    """
    replied = message.reply_to_message
    if replied is None:
        return None
    if replied.forum_topic_created is not None or (
        _in_topic(message) and replied.message_id == message.message_thread_id
    ):
        return None
    return replied


def _mentions(entities: dict[MessageEntity, str], bot: BotIdentity) -> bool:
    for entity, text in entities.items():
        if entity.type == MessageEntity.TEXT_MENTION:
            if entity.user is not None and entity.user.id == bot.id:
                return True
        elif bot.username and text.lower() == f"@{bot.username.lower()}":
            return True
    return False


def _targets(text: str, bot: BotIdentity) -> bool:
    """``/command@thisbot``: a command explicitly for us (plain ``/command`` may be any bot's)."""
    head = text.strip().split(maxsplit=1)[0]
    _, at, target = head.partition("@")
    return bool(at) and bool(bot.username) and target.lower() == bot.username.lower()
