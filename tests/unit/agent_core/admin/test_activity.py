"""A bot's status from its stored traffic."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_core.admin.activity import NO_ACTIVITY, BotActivity, BotStatus

EARLY = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LATE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _activity(state: str | None, *, failed_once: bool = False) -> BotActivity:
    return BotActivity(
        last_inbound_at=EARLY,
        last_delivery_state=state,
        last_delivery_at=LATE if state else None,
        last_delivery_failed_once=failed_once,
        last_error="boom" if failed_once else None,
        last_error_at=EARLY if failed_once else None,
    )


def test_a_bot_without_traffic_is_quiet() -> None:
    assert NO_ACTIVITY.status is BotStatus.QUIET
    assert NO_ACTIVITY.last_event_at is None


@pytest.mark.parametrize(
    ("state", "failed_once", "status"),
    [
        (None, False, BotStatus.OK),  # received, nothing to answer yet
        ("sent", False, BotStatus.OK),
        ("sent", True, BotStatus.OK),  # delivered after a retry
        ("pending", False, BotStatus.OK),
        ("pending", True, BotStatus.RETRYING),
        ("sending", True, BotStatus.RETRYING),
        ("failed", True, BotStatus.FAILING),
        ("unknown", False, BotStatus.FAILING),
    ],
)
def test_the_newest_reply_decides(state: str | None, failed_once: bool, status: BotStatus) -> None:
    assert _activity(state, failed_once=failed_once).status is status


def test_the_last_event_is_the_newest_of_inbound_and_delivery() -> None:
    assert _activity("sent").last_event_at == LATE
    assert _activity(None).last_event_at == EARLY
