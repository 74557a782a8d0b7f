"""The platform-free messages that cross between adapters and the turn pipeline."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from adapters.text import storable

ChatType = Literal["private", "group"]
EventKind = Literal["message", "edit", "delete"]


def _now() -> datetime:
    return datetime.now(UTC)


class InboundImage(BaseModel):
    """An image a message carries, as the platform describes it (nothing fetched yet).

    Sizes, dimensions and the content type are the platform's claims: the worker fetches
    the bytes through the platform API and checks them itself.
    """

    model_config = ConfigDict(frozen=True)

    ref: str
    """What the platform API fetches it by: a Telegram ``file_id``, a Discord attachment
    URL, a Slack ``url_private``."""
    filename: str = "image"
    size: int | None = None
    """Bytes, when the platform says."""
    width: int | None = None
    height: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Strings the database can hold (a file name is user input too)."""
        return storable(data) if isinstance(data, dict) else data


class InboundMessage(BaseModel):
    """Something a person (or another bot) said to, or near, one of our bots."""

    model_config = ConfigDict(frozen=True)

    platform: str
    """``telegram``, ``discord``, ``slack`` or ``webchat``."""
    bot_name: str = "default"
    """The bot id users configure; ``default`` for the bot configured from the environment."""
    tenant_id: str = "default"
    chat_id: str
    chat_type: ChatType = "private"
    thread_id: str = ""
    """A forum topic, Discord thread or Slack ``thread_ts``: its own session."""
    message_id: str | None = None
    """The platform's id for the message; retries with the same id are no-ops."""
    sender_id: str | None = None
    sender_name: str | None = None
    sender_is_bot: bool = False
    text: str
    addressed: bool = False
    """It mentions the bot, replies to one of its messages, or is a DM."""
    command: str | None = None
    """A chat command without the slash (``new``, ``compress``), when the text is one."""
    command_args: str = ""
    reply_to_message_id: str | None = None
    event: EventKind = "message"
    received_at: datetime = Field(default_factory=_now)
    meta: dict[str, Any] = Field(default_factory=dict)
    images: tuple[InboundImage, ...] = ()
    """Photos and image files attached to the message; ``text`` is their caption."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Make every string one the database can hold, whichever adapter built the message.

        See :mod:`adapters.text`; a message empty after that is refused by the intake.
        """
        return storable(data) if isinstance(data, dict) else data


class OutboundMessage(BaseModel):
    """A reply to deliver, exactly once, to one chat."""

    model_config = ConfigDict(frozen=True)

    platform: str
    bot_name: str = "default"
    chat_id: str
    chat_type: ChatType = "private"
    thread_id: str = ""
    text: str
    """Markdown; the adapter converts it to the platform's format and splits it."""
    reply_to_message_id: str | None = None
    delivery_id: str
    """Stable across retries of the same reply (the outbox id)."""
    message_id: str | None = None
    """The stored line this reply is, for platforms that show the conversation from the
    database (web chat tells its open pages which line to read)."""
    delivered_chunks: int = 0
    """Leading chunks an earlier attempt delivered: this attempt starts after them."""
    delivered_ids: tuple[str, ...] = ()
    """The platform's ids of those chunks' messages, in order."""
    unsettled_since: datetime | None = None
    """An attempt that began then may have posted chunks after ``delivered_chunks``: the
    deliverer settles that before it sends them again, or refuses to send."""
    streamed_ids: tuple[str, ...] = ()
    """Draft messages the reply was streamed into, in order: chunk ``i`` is an edit of
    ``streamed_ids[i]`` instead of a new message, and drafts left over are removed."""
    stream_unsettled: bool = False
    """A further draft message may have been posted without its id being recorded."""


class ChatTarget(BaseModel):
    """Where to show a typing indicator or stream a reply's drafts."""

    model_config = ConfigDict(frozen=True)

    platform: str
    bot_name: str = "default"
    chat_id: str
    thread_id: str = ""
    chat_type: ChatType = "private"
    reply_to_message_id: str | None = None
    """The message a streamed reply answers (quoted in groups, like the first chunk)."""
