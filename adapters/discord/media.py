"""Fetch a Discord attachment from the URL the gateway message carried."""

from __future__ import annotations

from adapters.media import MediaFetcher, download


class DiscordMediaFetcher(MediaFetcher):
    """Downloads attachments people sent to one Discord bot.

    Attachment URLs are signed by Discord and need no token; they expire after a day or
    so, long after the turn that reads them.
    """

    def fetch(self, ref: str, *, max_bytes: int) -> bytes:
        """The bytes at the attachment URL ``ref``.

        Raises:
            MediaTooLarge: the attachment is over ``max_bytes``.
            MediaUnavailable: the CDN refused it (an expired link) or did not answer.
        """
        return download(self._client, ref, max_bytes=max_bytes)
