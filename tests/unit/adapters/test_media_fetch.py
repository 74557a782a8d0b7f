"""Downloads never read past the image cap, whatever the platform claims."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from adapters.media import CHUNK_BYTES, MediaTooLarge, MediaUnavailable, download, format_bytes
from adapters.telegram.media import file_base

CAP = 1000


class Counted(httpx.SyncByteStream):
    """A body that counts how much of it was read."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.read = 0

    def __iter__(self) -> Iterator[bytes]:
        while self.read < self.size:
            chunk = b"x" * min(100, self.size - self.read)
            self.read += len(chunk)
            yield chunk


def client(response: httpx.Response) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda request: response))


def test_a_file_under_the_cap_is_read_whole() -> None:
    assert download(client(httpx.Response(200, content=b"a" * CAP)), "http://x/f", max_bytes=CAP)


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    body = Counted(5000)
    response = httpx.Response(200, headers={"content-length": "5000"}, stream=body)
    with pytest.raises(MediaTooLarge, match="limit"):
        download(client(response), "http://x/f", max_bytes=CAP)
    assert body.read == 0


def test_an_undeclared_body_stops_being_read_just_past_the_cap() -> None:
    body = Counted(10_000_000)
    with pytest.raises(MediaTooLarge):
        download(client(httpx.Response(200, stream=body)), "http://x/f", max_bytes=CAP)
    assert body.read <= CAP + CHUNK_BYTES


def test_an_error_status_is_unavailable() -> None:
    with pytest.raises(MediaUnavailable, match="403"):
        download(client(httpx.Response(403)), "http://x/f", max_bytes=CAP)


def test_a_failed_connection_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    failing = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(MediaUnavailable, match="ConnectError"):
        download(failing, "http://x/f", max_bytes=CAP)


def test_sizes_read_as_people_say_them() -> None:
    assert format_bytes(5 * 1024 * 1024) == "5 MB"
    assert format_bytes(1536) == "1.5 KB"


def test_telegram_files_sit_beside_the_bot_api() -> None:
    assert file_base("https://api.telegram.org/bot") == "https://api.telegram.org/file/bot"
    assert file_base("http://127.0.0.1:8081/bot") == "http://127.0.0.1:8081/file/bot"
