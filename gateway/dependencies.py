"""Request-scoped access to the process runtime."""

from __future__ import annotations

from fastapi import Request

from workers.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The runtime the app was started with."""
    runtime: Runtime = request.app.state.runtime
    return runtime
