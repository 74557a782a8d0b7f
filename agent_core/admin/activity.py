"""A bot's status, read from what is stored: its last inbound message and its deliveries.

Connections live in whichever gateway runs them, so the status every gateway can show is
the one the database proves: when the bot last heard from its platform, how its latest
reply went, and the latest delivery error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from agent_core.db.models import OutboxState


class BotStatus(StrEnum):
    """The state a bot's stored traffic shows."""

    QUIET = "no traffic yet"
    """Nothing received, nothing sent."""
    OK = "ok"
    """Its latest reply was delivered, or is on its way with no error."""
    RETRYING = "retrying"
    """Its latest reply failed at least once and will be tried again."""
    FAILING = "failing"
    """Its latest reply was not delivered (failed), or may not have been (unknown)."""


@dataclass(frozen=True)
class BotActivity:
    """What is stored about one bot's traffic."""

    last_inbound_at: datetime | None
    """When its newest message from the platform was stored."""
    last_delivery_state: str | None
    """The outbox state of its newest reply."""
    last_delivery_at: datetime | None
    """When its newest reply was sent, or last changed."""
    last_delivery_failed_once: bool
    """Its newest reply has met an error (it may still be retried)."""
    last_error: str | None
    """The newest delivery error of any of its replies."""
    last_error_at: datetime | None
    """When the latest attempt at the reply that met that error began."""

    @property
    def last_event_at(self) -> datetime | None:
        """The newest of the inbound message and the delivery."""
        moments = [m for m in (self.last_inbound_at, self.last_delivery_at) if m is not None]
        return max(moments) if moments else None

    @property
    def status(self) -> BotStatus:
        """The status the newest reply (or the lack of any traffic) shows."""
        state = self.last_delivery_state
        if state in (OutboxState.FAILED, OutboxState.UNKNOWN):
            return BotStatus.FAILING
        if state in (OutboxState.PENDING, OutboxState.SENDING) and self.last_delivery_failed_once:
            return BotStatus.RETRYING
        if state is None and self.last_inbound_at is None:
            return BotStatus.QUIET
        return BotStatus.OK


NO_ACTIVITY = BotActivity(None, None, None, False, None, None)
