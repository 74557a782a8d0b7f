"""Refuse request bodies over ``HUBBUB_MAX_BODY_BYTES`` before they are buffered.

Every route reads its body in full (JSON parsing, webhook signatures need the raw bytes),
so without a limit one large request without credentials can take the process past its
memory limit. This pure-ASGI middleware answers 413 from ``Content-Length`` before
anything is read, and counts streamed (chunked) bodies while they arrive, answering 413 as
soon as the limit is passed: never more than the limit plus one chunk is held. It runs
before routing, so webhooks are refused before their signature is verified.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    """The request body passed the limit while it was being received."""


def _content_length(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return bytes(value)
    return None


class BodyLimit:
    """Answers 413 to requests whose body is larger than ``max_bytes``.

    Args:
        app: the application behind it.
        max_bytes: the largest body accepted.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("`max_bytes` must be a positive integer")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 413 (or 400 for an unreadable length) itself."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if not declared.isdigit() or len(declared) > 19:
                await _answer(send, 400, "Content-Length is not a number of bytes")
                return
            if int(declared) > self.max_bytes:
                await self._refuse(send)
                return
        received = 0
        exceeded = False
        started = False

        async def counted() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if exceeded:
                # Whatever the app made of the interrupted read, the answer is a 413.
                if not started and message["type"] == "http.response.start":
                    started = True
                    await self._refuse(send)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except BodyTooLarge:
            if not started:
                started = True
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await _answer(send, 413, f"request body is larger than {self.max_bytes:,} bytes")


async def _answer(send: Send, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
