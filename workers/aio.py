"""An event loop on a background thread, so synchronous workers can use async platform clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """Runs coroutines on one long-lived loop; clients bound to it stay usable across calls."""

    def __init__(self, name: str = "hubbub-aio") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (for code that must schedule on it directly)."""
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result.

        Raises:
            TimeoutError: it took longer than ``timeout``; the coroutine is cancelled, so
                nothing it would still do (send another chunk) happens behind our back.
        """
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` without waiting (fire and forget, for best-effort work)."""
        asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
