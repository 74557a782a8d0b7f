"""Keep Discord's typing indicator up while a reply is being written.

Discord shows "Bot is typing…" for about ten seconds after ``POST /channels/{id}/typing``
(or until the bot posts), while a model turn often takes longer. So after the first
trigger the indicator is renewed every few seconds until the reply is delivered to that
channel or a ceiling passes, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

REFRESH_SECONDS = 8.0
"""Renew before Discord's ten-second indicator runs out."""
MAX_SECONDS = 90.0
"""Stop renewing after this long even if no reply came (a turn that failed silently)."""

Trigger = Callable[[], Awaitable[None]]


class TypingIndicators:
    """One renewing indicator per channel, on the event loop that calls it."""

    def __init__(
        self, *, refresh_seconds: float = REFRESH_SECONDS, max_seconds: float = MAX_SECONDS
    ) -> None:
        self._refresh = refresh_seconds
        self._max = max_seconds
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._starting: dict[int, object] = {}

    async def start(self, channel_id: int, trigger: Trigger) -> None:
        """Show the indicator in ``channel_id`` now and keep it up.

        Raises:
            Exception: whatever ``trigger`` raises the first time (nothing is kept up then).
        """
        self.stop(channel_id)
        attempt = object()
        self._starting[channel_id] = attempt
        try:
            await trigger()
        finally:
            # A reply may have gone out while the first trigger was on its way.
            stopped_meanwhile = self._starting.get(channel_id) is not attempt
            if not stopped_meanwhile:
                del self._starting[channel_id]
        if not stopped_meanwhile:
            self._tasks[channel_id] = asyncio.create_task(self._keep_up(channel_id, trigger))

    def stop(self, channel_id: int) -> None:
        """Stop renewing in ``channel_id`` (the reply is going out)."""
        self._starting.pop(channel_id, None)
        task = self._tasks.pop(channel_id, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        """Stop every indicator and wait for them to end."""
        self._starting.clear()
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def active(self) -> set[int]:
        """Channels whose indicator is being renewed."""
        return {key for key, task in self._tasks.items() if not task.done()}

    async def _keep_up(self, channel_id: int, trigger: Trigger) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max
        try:
            while loop.time() + self._refresh < deadline:
                await asyncio.sleep(self._refresh)
                await trigger()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("typing indicator renewal failed", exc_info=True)
        finally:
            if self._tasks.get(channel_id) is asyncio.current_task():
                del self._tasks[channel_id]
