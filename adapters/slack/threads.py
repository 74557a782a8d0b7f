"""Threads the bot has taken part in, so a follow-up there counts as addressing it.

In Slack a thread is the reply to a message: once the bot has answered in a thread, the
people in it talk to the bot without mentioning it each time. The bot learns its threads
from the echoes of its own posts (Slack sends an app its own messages as events); after a
restart, the first follow-up in an old thread needs a mention again.
"""

from __future__ import annotations

from collections import OrderedDict

MAX_TRACKED_THREADS = 20_000


class ThreadTracker:
    """A bounded, most-recently-used set of ``(channel, thread_ts)``."""

    def __init__(self, max_threads: int = MAX_TRACKED_THREADS) -> None:
        self._max = max_threads
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()

    def joined(self, channel: str, thread_ts: str) -> None:
        """The bot posted in this thread."""
        key = (channel, thread_ts)
        self._threads[key] = None
        self._threads.move_to_end(key)
        while len(self._threads) > self._max:
            self._threads.popitem(last=False)

    def has_joined(self, channel: str, thread_ts: str) -> bool:
        """Whether the bot posted in this thread (since this process started)."""
        key = (channel, thread_ts)
        if key not in self._threads:
            return False
        self._threads.move_to_end(key)
        return True
