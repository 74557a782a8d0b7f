"""Images people sent: one row per image, its bytes in a table of their own.

The message row only names its media ids (``meta["media"]``); the bytes live in
``media_blobs`` so a transcript read never drags megabytes along, and every process
(gateway, workers on other hosts) reads them from the one database.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from agent_core.db.base import Base, TimestampMixin


class MediaState(StrEnum):
    """How far fetching an image got."""

    PENDING = "pending"
    """Recognised at intake; the worker fetches it before the model call."""
    READY = "ready"
    """Fetched, checked and stored in ``media_blobs``."""
    REFUSED = "refused"
    """Not included (too large, not an image, unavailable); ``reason`` says why."""


class Media(TimestampMixin, Base):
    """One image attached to a stored message."""

    __tablename__ = "media"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), nullable=False, index=True
    )
    position: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Order among the message's images."""
    platform_ref: Mapped[str] = mapped_column(String(2048), nullable=False)
    """What the platform API fetches it by: a Telegram ``file_id``, a Discord or Slack URL."""
    filename: Mapped[str] = mapped_column(String(255), nullable=False)
    width: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """As the platform reported it; only ever shown in text."""
    height: Mapped[int | None] = mapped_column(Integer, nullable=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default=MediaState.PENDING)
    reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """Why a refused image was not included, in words a user understands."""
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    content_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """Read from the bytes (magic numbers), never taken from the platform's claim."""
    size_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)


class MediaBlob(Base):
    """The bytes of a ready image."""

    __tablename__ = "media_blobs"

    media_id: Mapped[str] = mapped_column(
        ForeignKey("media.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
