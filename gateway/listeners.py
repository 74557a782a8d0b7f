"""The gateway's sockets: the public listener and, optionally, an internal one.

With ``HUBBUB_INTERNAL_PORT`` set, the API docs, the Prometheus metrics and the web console
are served only on the internal listener (loopback by default), never on the public one
that an ingress or the internet reaches. Both sockets are bound before serving starts, so
a port in use stops the gateway at once with a clear message instead of half-starting it.
"""

from __future__ import annotations

import errno
import socket

from starlette.types import ASGIApp, Receive, Scope, Send

from agent_core.config import Settings

INTERNAL_PREFIXES = ("/docs", "/redoc", "/openapi.json", "/metrics", "/console")
"""Served on the internal listener only (``/docs/oauth2-redirect`` and the console's pages
included): operator tools, reached through a port-forward or a private network."""
PROBES = ("/healthz", "/readyz")
"""Answered on both listeners, so either can be probed."""


def is_internal(path: str) -> bool:
    """Whether ``path`` is one of the operator endpoints kept off the public listener."""
    return any(path == p or path.startswith(p + "/") for p in INTERNAL_PREFIXES)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6, by what ``host`` resolves to).

    Raises:
        OSError: the address is in use or cannot be bound.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class CannotListen(Exception):
    """A listener could not be bound; the message says which and what to change."""


def bind_listeners(settings: Settings) -> list[socket.socket]:
    """The public socket and, when configured, the internal one (both bound, listening).

    Raises:
        CannotListen: a port is taken (naming the setting that moves it) or unusable.
    """
    wanted = [(settings.host, settings.port, "HUBBUB_PORT")]
    if settings.internal_port is not None:
        wanted.append((settings.internal_host, settings.internal_port, "HUBBUB_INTERNAL_PORT"))
    sockets: list[socket.socket] = []
    for host, port, setting in wanted:
        try:
            sockets.append(bind(host, port))
        except OSError as exc:
            for sock in sockets:
                sock.close()
            if exc.errno == errno.EADDRINUSE:
                message = f"port {port} is in use — set {setting} or stop the other process"
            else:
                message = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            raise CannotListen(message) from exc
    return sockets


class SplitListeners:
    """ASGI middleware: operator endpoints on the internal port only, the rest elsewhere.

    A request for the wrong listener gets the same 404 as a path that does not exist.
    """

    def __init__(self, app: ASGIApp, *, internal_port: int) -> None:
        self.app = app
        self.internal_port = internal_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 404 when it reached the wrong listener."""
        if scope["type"] == "http":
            server = scope.get("server") or (None, None)
            internal = server[1] == self.internal_port
            path: str = scope["path"]
            if path not in PROBES and internal != is_internal(path):
                await _not_found(send)
                return
        await self.app(scope, receive, send)


async def _not_found(send: Send) -> None:
    body = b'{"detail":"Not Found"}'
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
