"""Budget periods (a day, a month) in the deployment's time zone, read from an injectable clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from agent_core.db.base import utcnow

Clock = Callable[[], datetime]
"""The current time, timezone-aware; tests pass one they move by hand."""
SYSTEM_CLOCK: Clock = utcnow


class Period(StrEnum):
    """How long a budget lasts before it starts again."""

    DAY = "day"
    MONTH = "month"


@dataclass(frozen=True, slots=True)
class Window:
    """One period: when it started and ends (UTC), and its name (``2026-12-02``)."""

    start: datetime
    end: datetime
    label: str


def window(period: Period, now: datetime, timezone: str) -> Window:
    """The period of ``period`` kind that contains ``now``, with days in ``timezone``."""
    zone = ZoneInfo(timezone)
    local = now.astimezone(zone)
    if period is Period.DAY:
        start = local.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)  # wall-clock arithmetic: the next midnight
        label = start.strftime("%Y-%m-%d")
    else:
        start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = (start + timedelta(days=32)).replace(day=1)
        label = start.strftime("%Y-%m")
    # Rebuilt from wall-clock fields so a daylight-saving change gets the right offset.
    start = start.replace(tzinfo=None).replace(tzinfo=zone)
    end = end.replace(tzinfo=None).replace(tzinfo=zone)
    return Window(start.astimezone(UTC), end.astimezone(UTC), label)
