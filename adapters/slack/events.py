"""Slack events and slash commands to ``InboundMessage``.

- Chats: ``channel_type`` ``im`` is a private chat; channels, private channels and group
  DMs (``mpim``) are groups. A thread reply (``thread_ts`` ≠ ``ts``) belongs to the thread's
  own session (``thread_id`` = ``thread_ts``) and refers to the thread's parent message.
- Addressed: a DM, a mention of the bot (``app_mention`` or ``<@BOT>`` in a message), or a
  message in a thread the bot started or has posted in.
- The bot's own messages never become inbound messages; they only teach it its threads.
- ``message_changed`` is an edit (when the text changed), ``message_deleted`` a delete.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from adapters.base import Allowlist, BotConfig
from adapters.commands import parse_command
from adapters.messages import ChatType, InboundImage, InboundMessage
from adapters.slack.identity import BotIdentity
from adapters.slack.ids import command_key, message_key
from adapters.slack.text import mentioned_users, mentions, strip_leading_mention, to_plain
from adapters.slack.threads import ThreadTracker
from adapters.slack.users import SlackUser, UserDirectory, name_from_profile

log = logging.getLogger(__name__)

PLATFORM = "slack"
KNOWN_COMMANDS = frozenset(
    {"help", "new", "usage", "compress", "compact", "memory", "forget", "model", "stop"}
)
NEW_MESSAGE_SUBTYPES = frozenset({"bot_message", "thread_broadcast", "file_share", "me_message"})
"""Message subtypes that are something someone said (besides plain messages)."""
CHANGE_SUBTYPES = frozenset({"message_changed", "message_deleted"})
"""Message subtypes that edit or delete what someone said."""
MAX_MENTION_LOOKUPS = 10
"""Mentions beyond this many distinct users keep their ids, so one message costs few calls."""

Event = Mapping[str, Any]


def chat_type_of(channel: str, channel_type: str | None) -> ChatType:
    """``private`` for a DM, else ``group``.

    A DM is ``channel_type`` ``im``, or a ``D…`` channel when Slack gives no type.
    """
    if channel_type is not None:
        return "private" if channel_type == "im" else "group"
    return "private" if channel.startswith("D") else "group"


def _thread_of(event: Event) -> str:
    thread_ts = event.get("thread_ts")
    if isinstance(thread_ts, str) and thread_ts and thread_ts != event.get("ts"):
        return thread_ts
    return ""


def _with_extras(text: str, event: Event) -> str:
    """The text plus what else the message carries.

    File names, and the fallback text of attachments: integrations often post nothing
    but an attachment.
    """
    lines = [text] if text.strip() else []
    for attachment in event.get("attachments") or []:
        if isinstance(attachment, dict):
            extra = attachment.get("fallback") or attachment.get("text") or ""
            if isinstance(extra, str) and extra.strip() and extra.strip() != text.strip():
                lines.append(to_plain(extra.strip()))
    for file in event.get("files") or []:
        if isinstance(file, dict) and _image_of(file) is None:
            lines.append(f"[file: {file.get('name') or file.get('title') or 'file'}]")
    return "\n".join(lines)


def _image_of(file: Mapping[str, Any]) -> InboundImage | None:
    """A shared file as an image to fetch (from ``url_private``, with the bot token)."""
    url = file.get("url_private")
    if not str(file.get("mimetype") or "").startswith("image/") or not isinstance(url, str):
        return None
    return InboundImage(
        ref=url,
        filename=str(file.get("name") or file.get("title") or "image"),
        size=_int(file.get("size")),
        width=_int(file.get("original_w")),
        height=_int(file.get("original_h")),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def images_of(event: Event) -> tuple[InboundImage, ...]:
    """The image files shared with a message; other files are named in its text."""
    found = (_image_of(f) for f in event.get("files") or [] if isinstance(f, Mapping))
    return tuple(image for image in found if image is not None)


def _command(text: str) -> tuple[str | None, str]:
    # Unknown names too: the bot answers "unknown command" rather than the model.
    parsed = parse_command(text)
    return parsed if parsed is not None else (None, "")


class EventNormaliser:
    """Builds inbound messages for one bot; looks up display names as it goes."""

    def __init__(self, config: BotConfig, users: UserDirectory, threads: ThreadTracker) -> None:
        self._config = config
        self._users = users
        self._threads = threads

    def _base(self, channel: str, chat_type: ChatType, thread_id: str) -> dict[str, Any]:
        return {
            "platform": PLATFORM,
            "bot_name": self._config.bot_name,
            "tenant_id": self._config.tenant_id,
            "chat_id": channel,
            "chat_type": chat_type,
            "thread_id": thread_id,
        }

    async def from_event(self, event: Event, identity: BotIdentity) -> InboundMessage | None:
        """The inbound message for an Events API ``event``, or ``None``.

        ``None`` when it is not one: the bot's own message, an unrelated subtype, an
        unchanged edit, a disallowed sender or chat.
        """
        kind = event.get("type")
        channel = event.get("channel")
        if kind not in ("message", "app_mention") or not isinstance(channel, str):
            return None
        subtype = event.get("subtype")
        if subtype is not None and subtype not in NEW_MESSAGE_SUBTYPES | CHANGE_SUBTYPES:
            return None
        # Checked here as well as at intake so an ignored message costs no name lookups.
        allowlist = await self._config.allowlist()
        if subtype == "message_changed":
            return self._edit(event, channel, identity, allowlist)
        if subtype == "message_deleted":
            return self._delete(event, channel, identity, allowlist)
        return await self._message(event, channel, identity, allowlist)

    async def _message(
        self, event: Event, channel: str, identity: BotIdentity, allowlist: Allowlist
    ) -> InboundMessage | None:
        ts = event.get("ts")
        if not isinstance(ts, str):
            return None
        user, bot_id = event.get("user"), event.get("bot_id")
        thread_id = _thread_of(event)
        if identity.is_self(user=user, bot_id=bot_id):
            if thread_id:
                self._threads.joined(channel, thread_id)
            return None
        sender_id = user or bot_id
        if not allowlist.allows(sender_id, channel):
            return None
        chat_type = chat_type_of(channel, event.get("channel_type"))
        raw = str(event.get("text") or "")
        mentioned = event.get("type") == "app_mention" or mentions(raw, identity.user_id)
        in_our_thread = bool(thread_id) and (
            event.get("parent_user_id") == identity.user_id
            or self._threads.has_joined(channel, thread_id)
        )
        # Lookups run side by side: Slack is waiting for the ack.
        sender, readable = await asyncio.gather(
            self._sender(event, user, bot_id), self._readable(raw, identity)
        )
        text = _with_extras(readable, event)
        command, args = _command(text)
        return InboundMessage(
            **self._base(channel, chat_type, thread_id),
            message_id=message_key(channel, ts),
            sender_id=sender_id,
            sender_name=sender.name if sender else None,
            sender_is_bot=bool(bot_id) or subtype_is_bot(event) or bool(sender and sender.is_bot),
            text=text,
            addressed=chat_type == "private" or mentioned or in_our_thread,
            command=command,
            command_args=args,
            reply_to_message_id=message_key(channel, thread_id) if thread_id else None,
            images=images_of(event),
        )

    async def _sender(self, event: Event, user: str | None, bot_id: str | None) -> SlackUser | None:
        if user:
            profile = event.get("user_profile")
            name = name_from_profile(profile if isinstance(profile, dict) else None)
            if name is not None:
                known = SlackUser(user, name, is_bot=bool(bot_id))
                self._users.remember(known)
                return known
            return await self._users.lookup(user)
        if bot_id:
            profile = event.get("bot_profile")
            name = (profile or {}).get("name") if isinstance(profile, dict) else None
            return SlackUser(bot_id, str(name or event.get("username") or bot_id), is_bot=True)
        return None

    async def _readable(self, raw: str, identity: BotIdentity) -> str:
        others = [u for u in mentioned_users(raw) if u != identity.user_id][:MAX_MENTION_LOOKUPS]
        found = await asyncio.gather(*(self._users.lookup(user) for user in others))
        names = {identity.user_id: identity.name} | {user.id: user.name for user in found}
        return to_plain(strip_leading_mention(raw, identity.user_id), names).strip()

    def _edit(
        self, event: Event, channel: str, identity: BotIdentity, allowlist: Allowlist
    ) -> InboundMessage | None:
        message = event.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("ts"), str):
            return None
        user, bot_id = message.get("user"), message.get("bot_id")
        if identity.is_self(user=user, bot_id=bot_id) or not allowlist.allows(
            user or bot_id, channel
        ):
            return None
        previous = event.get("previous_message")
        text = str(message.get("text") or "")
        if isinstance(previous, dict) and previous.get("text") == text:
            return None  # an unfurl, a reply count or a reaction changed, not the words
        # Names already known only: an edit is not worth API calls while Slack waits.
        names = {identity.user_id: identity.name} | {
            user: known.name
            for user in mentioned_users(text)
            if (known := self._users.cached(user)) is not None
        }
        readable = to_plain(strip_leading_mention(text, identity.user_id), names).strip()
        return InboundMessage(
            **self._base(
                channel, chat_type_of(channel, event.get("channel_type")), _thread_of(message)
            ),
            message_id=message_key(channel, message["ts"]),
            sender_id=user or bot_id,
            text=_with_extras(readable, message),
            event="edit",
        )

    def _delete(
        self, event: Event, channel: str, identity: BotIdentity, allowlist: Allowlist
    ) -> InboundMessage | None:
        deleted_ts = event.get("deleted_ts")
        if not isinstance(deleted_ts, str):
            return None
        previous = event.get("previous_message")
        previous = previous if isinstance(previous, dict) else {}
        user, bot_id = previous.get("user"), previous.get("bot_id")
        if identity.is_self(user=user, bot_id=bot_id) or not allowlist.allows(
            user or bot_id, channel
        ):
            return None
        return InboundMessage(
            **self._base(
                channel, chat_type_of(channel, event.get("channel_type")), _thread_of(previous)
            ),
            message_id=message_key(channel, deleted_ts),
            sender_id=user or bot_id,
            text="",
            event="delete",
        )

    async def from_command(self, payload: Event) -> InboundMessage | None:
        """The inbound message for a slash command, or ``None`` for a disallowed sender.

        ``/compress auth`` works, and so does ``/hubbub compress auth`` when the app
        registers one umbrella command instead. A known command becomes ``command`` and
        ``command_args``; anything else sent through the app's command is a message
        addressed to the bot.
        """
        channel, user = payload.get("channel_id"), payload.get("user_id")
        trigger = payload.get("trigger_id")
        if not (isinstance(channel, str) and isinstance(user, str) and isinstance(trigger, str)):
            return None
        if not (await self._config.allowlist()).allows(user, channel):
            return None
        name = str(payload.get("command") or "").lstrip("/").lower()
        text = str(payload.get("text") or "").strip()
        if name not in KNOWN_COMMANDS:
            first, _, rest = text.partition(" ")
            if first.lstrip("/").lower() in KNOWN_COMMANDS:
                name, text = first.lstrip("/").lower(), rest.strip()
            else:
                name = ""
        private = payload.get("channel_name") == "directmessage" or channel.startswith("D")
        looked_up = await self._users.lookup(user)
        sender_name = looked_up.name if looked_up.name != user else payload.get("user_name")
        spoken = f"/{name} {text}".strip() if name else to_plain(text)
        if not spoken:
            return None
        return InboundMessage(
            **self._base(channel, "private" if private else "group", ""),
            message_id=command_key(channel, trigger),
            sender_id=user,
            sender_name=str(sender_name or user),
            text=spoken,
            addressed=True,
            command=name or None,
            command_args=text if name else "",
            meta={"slash_command": payload.get("command")},
        )


def subtype_is_bot(event: Event) -> bool:
    """Whether Slack marks the message as posted by a bot integration."""
    return event.get("subtype") == "bot_message"
