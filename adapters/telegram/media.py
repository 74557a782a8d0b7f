"""Fetch a Telegram file by its ``file_id``: ``getFile``, then the download from the file base.

``getFile`` says how large the file is before anything is downloaded, so an oversized
photo is refused without reading it. Telegram's own cloud API serves files up to 20 MB
to bots; the cap here is usually lower.
"""

from __future__ import annotations

import httpx

from adapters.media import MediaFetcher, MediaTooLarge, MediaUnavailable, download
from adapters.telegram.options import api_base, require_token

FILE_PATH_PREFIX = "/file"
"""Files live under ``…/file/bot<token>/<file_path>`` beside ``…/bot<token>/<method>``."""


def file_base(base: str) -> str:
    """The file download prefix for a Bot API prefix (``https://api.telegram.org/bot``)."""
    head, _, _ = base.rstrip("/").rpartition("/")
    return f"{head}{FILE_PATH_PREFIX}/bot"


class TelegramMediaFetcher(MediaFetcher):
    """Downloads files people sent to one Telegram bot."""

    def fetch(self, ref: str, *, max_bytes: int) -> bytes:
        """The bytes of the file with ``file_id`` ``ref``.

        Raises:
            MediaTooLarge: ``getFile`` or the download says it is over ``max_bytes``.
            MediaUnavailable: ``getFile`` failed (an expired or foreign ``file_id``).
        """
        token = require_token(self.config)
        base = api_base(self.config)
        try:
            answer = self._client.get(f"{base}{token}/getFile", params={"file_id": ref})
            body = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise MediaUnavailable(f"getFile failed ({type(exc).__name__})") from exc
        if not body.get("ok"):
            raise MediaUnavailable(f"getFile failed ({body.get('error_code', answer.status_code)})")
        result = body.get("result") or {}
        size = result.get("file_size")
        if isinstance(size, int) and size > max_bytes:
            raise MediaTooLarge(max_bytes)
        path = result.get("file_path")
        if not isinstance(path, str) or not path:
            raise MediaUnavailable("Telegram gave no file path (the file is too big for bots)")
        return download(self._client, f"{file_base(base)}{token}/{path}", max_bytes=max_bytes)
