"""Do each Slack delivery's work once, though Slack sends it again.

Slack resends an event it did not see acknowledged in 3 seconds (``X-Slack-Retry-Num``, same
``event_id``) and sends a mention twice (``app_mention`` and ``message``). Bolt does not
dedupe. A :class:`Ledger` remembers keys whose work is done or under way: a copy that
arrives while the first is still being stored waits for it, and takes over if it failed, so
a retry is never the reason a message is lost, nor stored twice.

It lives in the gateway process; across gateway replicas the database's dedupe on the
platform message id still holds for messages, and edits and deletes are idempotent.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

DEFAULT_TTL_SECONDS = 3600.0
"""Slack retries for up to about five minutes; an hour leaves room for slow retries."""
DEFAULT_MAX_KEYS = 50_000
DEFAULT_WAIT_SECONDS = 2.0
"""How long a copy waits for the first attempt, inside Slack's 3-second ack window."""


class StillInProgress(RuntimeError):
    """The first attempt is still running; answer so that the platform asks again later."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key} is still being processed")
        self.key = key


@dataclass(slots=True)
class _Entry:
    expires: float
    outcome: asyncio.Future[bool]
    """Resolves to ``True`` when the work was done, ``False`` when it failed."""


class Ledger:
    """Keys of work done (remembered for ``ttl`` seconds) or under way."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        max_keys: int = DEFAULT_MAX_KEYS,
        wait: float = DEFAULT_WAIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max_keys = max_keys
        self._wait = wait
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @asynccontextmanager
    async def attempt(self, key: str | None) -> AsyncIterator[bool]:
        """Yield ``True`` when the caller should do the work for ``key``.

        ``False`` means it was done already (or by a concurrent attempt). If the block
        raises, the key is released so a later copy does the work. A ``None`` key is
        always fresh.

        Raises:
            StillInProgress: another attempt is still running after the wait.
        """
        if key is None:
            yield True
            return
        fresh = await self._claim(key)
        if not fresh:
            yield False
            return
        entry = self._entries[key]
        try:
            yield True
        except BaseException:
            self._entries.pop(key, None)
            entry.outcome.set_result(False)
            raise
        entry.expires = self._clock() + self._ttl
        entry.outcome.set_result(True)

    async def _claim(self, key: str) -> bool:
        while True:
            self._evict()
            entry = self._entries.get(key)
            if entry is None:
                outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
                self._entries[key] = _Entry(self._clock() + self._ttl, outcome)
                return True
            if entry.outcome.done():
                return False
            try:
                done = await asyncio.wait_for(asyncio.shield(entry.outcome), self._wait)
            except TimeoutError:
                raise StillInProgress(key) from None
            if done:
                return False
            # The first attempt failed and released the key: try to take it over.

    def _evict(self) -> None:
        now = self._clock()
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            finished = entry.outcome.done()
            if finished and (entry.expires < now or len(self._entries) > self._max_keys):
                self._entries.popitem(last=False)
            elif not finished and len(self._entries) > self._max_keys:
                # Never forget work under way; look past it for finished entries.
                self._entries.move_to_end(key)
                if all(not e.outcome.done() for e in self._entries.values()):
                    return
            else:
                return
