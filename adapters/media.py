"""Fetch an image a person sent through the platform's API, never reading past a size cap.

Each platform package has a :class:`MediaFetcher` (``create_media_fetcher`` in
:mod:`adapters.registry`); all of them read the download through :func:`read_capped`, so
an oversized file costs at most ``max_bytes`` plus one read chunk (64 KB) of memory and
bandwidth, whatever the platform claimed about its size.

Errors::

    * MediaError
      - MediaTooLarge        larger than the cap (claimed or counted)
      - MediaUnavailable     the platform did not give us the file
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import httpx

from adapters.base import AdapterError, BotConfig

CHUNK_BYTES = 64 * 1024


class MediaError(AdapterError):
    """An image could not be fetched; ``reason`` says why in words a user understands."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        """Short, for the note the model and the user see."""

    def __str__(self) -> str:
        return self.reason


class MediaTooLarge(MediaError):
    """The file is larger than the cap."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"larger than the {format_bytes(max_bytes)} limit")
        self.max_bytes = max_bytes


class MediaUnavailable(MediaError):
    """The platform answered with an error, or did not answer."""


def format_bytes(size: int) -> str:
    """``5 MB``, ``512 KB``: a size as people read it (binary units)."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):g} MB"
    if size >= 1024:
        return f"{size / 1024:g} KB"
    return f"{size} bytes"


def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The body of a streamed ``response``, refusing it as soon as it passes ``max_bytes``.

    Raises:
        MediaTooLarge: the declared length or the bytes read exceed the cap.
        MediaUnavailable: the platform answered with an error status.
    """
    if response.status_code != httpx.codes.OK:
        raise MediaUnavailable(f"the platform answered {response.status_code}")
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise MediaTooLarge(max_bytes)
    body = bytearray()
    for chunk in response.iter_bytes(CHUNK_BYTES):
        body.extend(chunk)
        if len(body) > max_bytes:
            raise MediaTooLarge(max_bytes)
    return bytes(body)


def download(
    client: httpx.Client, url: str, *, max_bytes: int, headers: dict[str, str] | None = None
) -> bytes:
    """GET ``url`` and read at most ``max_bytes`` of it (a GET is safe to repeat).

    Raises:
        MediaTooLarge: the file is larger than ``max_bytes``.
        MediaUnavailable: an error status, or the request failed.
    """
    try:
        with client.stream("GET", url, headers=headers) as response:
            return read_capped(response, max_bytes)
    except httpx.HTTPError as exc:
        raise MediaUnavailable(f"the download failed ({type(exc).__name__})") from exc


class MediaFetcher(ABC):
    """Fetches one bot's images from its platform.

    Args:
        config: the bot's platform settings (token, API base).
        timeout: seconds for one request.
    """

    def __init__(self, config: BotConfig, *, timeout: float) -> None:
        self.config = config
        self._client = httpx.Client(timeout=timeout, follow_redirects=True)

    @abstractmethod
    def fetch(self, ref: str, *, max_bytes: int) -> bytes:
        """The bytes of the file ``ref`` names (an :class:`InboundImage` ``ref``).

        Raises:
            MediaTooLarge: the file is larger than ``max_bytes``.
            MediaUnavailable: the platform did not give us the file.
        """

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()
