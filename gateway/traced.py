"""HTTP requests that continue their caller's trace: webhooks, web chat, the admin API.

With tracing on, a request to one of those paths that carries a W3C ``traceparent``
header runs inside a server span continuing it, so the message it brings (intake's span
is then a child) belongs to the caller's trace. Admin requests are spans even without
the header (the start of a trace). Only the method, the route prefix and the status
become attributes: no ids from the query, no bodies.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core import tracing

ADMIN = "/api/admin/"
TRACED = ("/webhooks/", "/api/webchat/", ADMIN)
"""Path prefixes whose requests continue an incoming trace."""


def _traceparent(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"traceparent":
            return bytes(value).decode("latin-1")
    return None


class ContinueTraces:
    """ASGI middleware: the request's span continues the caller's ``traceparent``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request, inside a span when it is traced."""
        path = str(scope.get("path", ""))
        prefix = next((p for p in TRACED if path.startswith(p)), None)
        if scope["type"] != "http" or prefix is None or not tracing.enabled():
            await self.app(scope, receive, send)
            return
        parent = _traceparent(scope)
        if parent is None and prefix != ADMIN:
            await self.app(scope, receive, send)  # intake starts the message's own trace
            return
        method = str(scope.get("method", ""))
        with tracing.span(
            f"{method} {prefix}", parent=parent, root=parent is None, kind=tracing.SpanKind.SERVER
        ) as span:
            span.set_attributes({"http.request.method": method, "http.route": prefix})

            async def sent(message: Message) -> None:
                if message["type"] == "http.response.start":
                    span.set_attribute("http.response.status_code", int(message["status"]))
                await send(message)

            await self.app(scope, receive, sent)
