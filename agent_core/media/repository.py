"""All SQL for stored images: recorded at intake, fetched by the worker, read for prompts."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_core.db.models import Media, MediaBlob, MediaState, Message

MEDIA_META_KEY = "media"
"""Where a message's ``meta`` lists the ids of its images (and nothing else about them)."""


@dataclass(frozen=True, slots=True)
class ImageReference:
    """An image a platform message carries, before it is fetched."""

    ref: str
    filename: str = "image"
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What a transcript needs to know about one image (its bytes are read separately)."""

    id: str
    message_id: int
    filename: str
    width: int | None
    height: int | None
    state: str
    reason: str | None
    content_type: str | None


def new_media_ids(count: int) -> list[str]:
    """Unguessable ids for ``count`` new images (written to the message before the rows)."""
    return [uuid.uuid4().hex for _ in range(count)]


class MediaRepository:
    """Queries on ``media`` and ``media_blobs``; flushes, never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> MediaRepository:
        """The repository working in ``session``."""
        return cls(session)

    def add_pending(
        self,
        *,
        ids: Sequence[str],
        images: Sequence[ImageReference],
        tenant_id: str,
        session_id: str,
        message_id: int,
    ) -> None:
        """Record a stored message's images, to be fetched before its turn's model call."""
        self.session.add_all(
            Media(
                id=media_id,
                tenant_id=tenant_id,
                session_id=session_id,
                message_id=message_id,
                position=position,
                platform_ref=image.ref,
                filename=image.filename[:255] or "image",
                width=image.width,
                height=image.height,
                state=MediaState.PENDING,
            )
            for position, (media_id, image) in enumerate(zip(ids, images, strict=True))
        )
        self.session.flush()

    def pending(self, session_id: str, *, up_to_anchor: int) -> list[tuple[Media, int]]:
        """Images not fetched yet that a turn at ``up_to_anchor`` would show, with their bot."""
        query = (
            select(Media, Message.bot_id)
            .join(Message, Message.id == Media.message_id)
            .where(
                Media.session_id == session_id,
                Media.state == MediaState.PENDING,
                Message.anchor_seq <= up_to_anchor,
            )
            .order_by(Message.anchor_seq, Message.seq, Media.position)
        )
        return [(media, int(bot_id)) for media, bot_id in self.session.execute(query).all()]

    def store(self, media_id: str, data: bytes, content_type: str) -> None:
        """Keep a fetched image's bytes; it is ready for prompts."""
        media = self.session.get(Media, media_id)
        if media is None or media.state != MediaState.PENDING:
            return  # another worker stored (or refused) it meanwhile
        media.state = MediaState.READY
        media.content_type = content_type
        media.size_bytes = len(data)
        media.sha256 = hashlib.sha256(data).hexdigest()
        self.session.add(MediaBlob(media_id=media_id, data=data))
        self.session.flush()

    def refuse(self, media_id: str, reason: str) -> None:
        """Give up on an image: its note says why; the turn goes on without it."""
        media = self.session.get(Media, media_id)
        if media is None or media.state != MediaState.PENDING:
            return
        media.state = MediaState.REFUSED
        media.reason = reason[:200]
        self.session.flush()

    def infos(self, session_id: str, message_ids: Iterable[int | None]) -> list[ImageInfo]:
        """The images of these messages of the session, in the order they were sent."""
        wanted = {i for i in message_ids if i is not None}
        if not wanted:
            return []
        query = (
            select(
                Media.id,
                Media.message_id,
                Media.filename,
                Media.width,
                Media.height,
                Media.state,
                Media.reason,
                Media.content_type,
            )
            .where(Media.session_id == session_id)
            .order_by(Media.message_id, Media.position)
        )
        return [ImageInfo(*row) for row in self.session.execute(query) if row[1] in wanted]

    def blobs(self, media_ids: Sequence[str]) -> dict[str, bytes]:
        """The bytes of these ready images."""
        if not media_ids:
            return {}
        query = select(MediaBlob.media_id, MediaBlob.data).where(MediaBlob.media_id.in_(media_ids))
        return {media_id: bytes(data) for media_id, data in self.session.execute(query)}
