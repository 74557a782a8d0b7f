"""Fetch the images a turn will show, in the worker, right before the model call.

The webhook only records that a message carried images (the platform wants its answer
within seconds, and a download can take longer); the worker that answers fetches them
through the bot's platform API, checks each against the size cap and by its magic
number, and stores the bytes in the database, where every worker on every host reads
them. A failed fetch never fails the turn: the image is refused with a reason, and the
model reads that an image could not be included. Downloads are GETs, safe to repeat, so
a turn that runs again after a crash simply fetches what is still pending.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from adapters.base import AdapterError
from adapters.media import MediaError, MediaFetcher
from adapters.registry import create_media_fetcher
from agent_core.db.engine import transaction
from agent_core.media.repository import MediaRepository
from agent_core.media.sniff import image_type
from workers import metrics
from workers.bots import BotDirectory

log = logging.getLogger(__name__)

NOT_AN_IMAGE = "not a PNG, JPEG, GIF or WebP image"
NO_FETCHER = "this platform cannot fetch files"
UNAVAILABLE = "the platform did not give the file"


@dataclass(frozen=True, slots=True)
class PendingImage:
    """An image a turn shows whose bytes are still on the platform."""

    media_id: str
    ref: str
    bot_id: int


class MediaFetchStep:
    """Fetches a session's pending images; one instance per process, shared by its threads.

    Args:
        factory: the database.
        bots: the bots' platform settings (tokens).
        max_bytes: the size cap per image.
        timeout: seconds per platform request.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        bots: BotDirectory,
        *,
        max_bytes: int,
        timeout: float,
    ) -> None:
        self._factory = factory
        self._bots = bots
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._fetchers: dict[int, MediaFetcher | None] = {}
        self._lock = threading.Lock()

    @staticmethod
    def pending(db: Session, session_id: str, *, up_to_anchor: int) -> list[PendingImage]:
        """The images a turn at ``up_to_anchor`` shows that are not fetched yet.

        Read in the caller's transaction (the turn's first), so a turn without images
        pays one query for this, not a transaction of its own.
        """
        return [
            PendingImage(media.id, media.platform_ref, bot_id)
            for media, bot_id in MediaRepository.from_session(db).pending(
                session_id, up_to_anchor=up_to_anchor
            )
        ]

    def fetch(self, session_id: str, images: list[PendingImage]) -> None:
        """Fetch and store (or refuse) each of ``images``."""
        for image in images:
            self._fetch_one(session_id, image.media_id, image.ref, image.bot_id)

    def _fetch_one(self, session_id: str, media_id: str, ref: str, bot_id: int) -> None:
        fetcher = self._fetcher(bot_id)
        if fetcher is None:
            self._refuse(session_id, media_id, NO_FETCHER)
            return
        try:
            data = fetcher.fetch(ref, max_bytes=self._max_bytes)
        except MediaError as exc:
            self._refuse(session_id, media_id, exc.reason)
            return
        except AdapterError as exc:  # the bot's settings cannot fetch (no token)
            log.warning(
                "image fetch impossible",
                extra={"session_id": session_id, "error": type(exc).__name__},
            )
            self._refuse(session_id, media_id, UNAVAILABLE)
            return
        content_type = image_type(data)
        if content_type is None:
            self._refuse(session_id, media_id, NOT_AN_IMAGE)
            return
        with transaction(self._factory) as db:
            MediaRepository.from_session(db).store(media_id, data, content_type)
        metrics.MEDIA.labels("stored").inc()
        log.info(
            "image stored",
            extra={
                "session_id": session_id,
                "media_id": media_id,
                "content_type": content_type,
                "bytes": len(data),
            },
        )

    def _refuse(self, session_id: str, media_id: str, reason: str) -> None:
        with transaction(self._factory) as db:
            MediaRepository.from_session(db).refuse(media_id, reason)
        metrics.MEDIA.labels("refused").inc()
        log.info(
            "image not included",
            extra={"session_id": session_id, "media_id": media_id, "reason": reason},
        )

    def _fetcher(self, bot_id: int) -> MediaFetcher | None:
        with self._lock:
            if bot_id in self._fetchers:
                return self._fetchers[bot_id]
        try:
            config = self._bots.config(bot_id)
        except KeyError:
            return None
        fetcher = create_media_fetcher(config, timeout=self._timeout)
        with self._lock:
            self._fetchers.setdefault(bot_id, fetcher)
            return self._fetchers[bot_id]

    def close(self) -> None:
        """Release the fetchers' connections."""
        with self._lock:
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            if fetcher is not None:
                fetcher.close()
