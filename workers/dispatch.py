"""How the pipeline asks for work to happen: the doorbell, not the mailbox.

Messages and replies are durable in the database before anyone rings; a lost ring (a
broker restart, a crashed worker) only delays work until the sweeper rings again.
"""

from __future__ import annotations

from typing import Protocol


class Dispatcher(Protocol):
    """Schedules session drains and reply deliveries somewhere."""

    def kick_session(self, session_id: str) -> None:
        """Make sure the session's waiting messages get their turns."""
        ...

    def kick_delivery(self, outbox_id: int) -> None:
        """Make sure a due reply gets delivered."""
        ...

    def kick_compaction(self, session_id: str, trigger: str = "background") -> None:
        """Compact the session off the reply path if it is over the trigger's line.

        ``trigger`` is ``background`` (a busy thread crossed its line) or ``idle`` (a quiet
        session grew since its last compaction).
        """
        ...
