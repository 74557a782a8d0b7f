"""The body limit as an ASGI middleware, for what a server in front may pass through."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from gateway.limits import BodyLimit

pytestmark = pytest.mark.anyio


async def _echo(scope: Scope, receive: Receive, send: Send) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def _call(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> list[Message]:
    pending = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await BodyLimit(_echo, max_bytes=10)(scope, receive, send)
    return sent


@pytest.mark.parametrize("value", [b"12abc", b"-1", b"9" * 40, b"\xd9\xa1"])
async def test_unreadable_content_length_is_a_400(value: bytes) -> None:
    start, body = await _call([(b"content-length", value)], [b""])
    assert start["status"] == 400
    assert b"Content-Length is not a number of bytes" in body["body"]


async def test_declared_length_over_the_limit_is_refused_unread() -> None:
    start, _ = await _call([(b"content-length", b"11")], [b"never read"])
    assert start["status"] == 413


async def test_streamed_body_is_cut_off_when_it_passes_the_limit() -> None:
    start, body = await _call([], [b"123456", b"7890", b"X", b"never read"])
    assert start["status"] == 413
    assert body["body"] == b'{"error": "request body is larger than 10 bytes"}'


async def test_bodies_within_the_limit_pass() -> None:
    start, body = await _call([(b"content-length", b"10")], [b"12345", b"67890"])
    assert (start["status"], body["body"]) == (200, b"1234567890")
