"""Fetch a Slack file from its ``url_private``, which only answers with the bot token."""

from __future__ import annotations

from adapters.media import MediaFetcher, MediaUnavailable, download


class SlackMediaFetcher(MediaFetcher):
    """Downloads files people shared with one Slack bot."""

    def fetch(self, ref: str, *, max_bytes: int) -> bytes:
        """The bytes at ``url_private`` ``ref``, read with ``Authorization: Bearer <bot token>``.

        Raises:
            MediaTooLarge: the file is over ``max_bytes``.
            MediaUnavailable: no token, or Slack refused the file.
        """
        if not self.config.token:
            raise MediaUnavailable("the Slack bot has no token to read files with")
        return download(
            self._client,
            ref,
            max_bytes=max_bytes,
            headers={"Authorization": f"Bearer {self.config.token}"},
        )
