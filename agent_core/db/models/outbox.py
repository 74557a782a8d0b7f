"""The outbox: exactly one reply per triggering message, with its delivery state."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, BigIntId, TimestampMixin, UTCDateTime


class OutboxState(StrEnum):
    """Delivery progress of a reply."""

    PENDING = "pending"
    SENDING = "sending"
    """Claimed by one deliverer; nobody else sends it while the claim lasts."""
    SENT = "sent"
    FAILED = "failed"
    """Not delivered, and never will be: the platform refused it, or attempts ran out while
    every failure proved nothing was sent. The reason is in ``last_error``."""
    UNKNOWN = "unknown"
    """A send may or may not have reached the platform, and there is no safe way to find
    out or to try again (Telegram): never resent, left for the operator to look at."""


class OutboxEntry(TimestampMixin, Base):
    """A reply waiting for, or done with, delivery to its platform."""

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_state_next", "state", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    trigger_message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), nullable=False, unique=True
    )
    """The message this answers; unique, so a task that runs twice cannot reply twice."""
    reply_message_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), nullable=True
    )
    platform: Mapped[str] = mapped_column(String(32), nullable=False)
    chat_id: Mapped[str] = mapped_column(String(128), nullable=False)
    thread_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    reply_to_platform_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default=OutboxState.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the latest claim began: no request of that attempt reached the platform earlier."""
    unsettled_since: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """An attempt that began then may have posted the next chunk; the next attempt settles
    that first (a nonce, the channel's history) or, where it cannot, marks it unknown."""
    delivered_chunks: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )
    """How many leading chunks the platform is known to have (their ids are in
    ``platform_message_ids``); a later attempt starts after them."""
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    platform_message_ids: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)


class ReplyStream(TimestampMixin, Base):
    """The platform messages a reply is being streamed into, before the reply is stored.

    Written before each new message is posted and right after it is, so that a turn run
    again (a worker killed mid-stream) edits these messages instead of posting new ones,
    and the final delivery turns them into the final text.
    """

    __tablename__ = "reply_streams"

    trigger_message_id: Mapped[int] = mapped_column(
        BigIntId, ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    """The message the streamed reply answers (one stream per turn, like the outbox)."""
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    message_ids: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    """The platform's ids of the posted draft messages, in reply order."""
    unsettled_since: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """A draft message was being posted then and its id is not known: it may exist, so
    nothing more is posted for this reply unless the platform can settle it."""
