"""The console's gauge drawing and its CSRF / scope checks, without a server."""

from __future__ import annotations

import pytest

from agent_core.admin.keys import Caller, Scope
from gateway.console.access import Refused, Viewer, check_csrf, check_write
from gateway.console.sessions import MemorySessionStore, new_session
from gateway.console.views import bar_chart, gauge_view
from gateway.routes.admin import Gauge


def _gauge(stored: int, window: int | None = 10_000) -> Gauge:
    return Gauge(
        stored_tokens=stored,
        last_prompt_tokens=0,
        window=window,
        threshold=5_000 if window else None,
        hygiene=8_500 if window else None,
        message_limit=5_000,
        fraction_of_window=None,
        compaction_count=0,
    )


@pytest.mark.parametrize(
    ("stored", "width", "level"),
    [(2_500, 25.0, "ok"), (5_000, 50.0, "high"), (9_000, 90.0, "over"), (20_000, 100.0, "over")],
)
def test_the_gauge_marks_its_lines_on_the_window(stored: int, width: float, level: str) -> None:
    view = gauge_view(_gauge(stored))
    assert view.used_width == width
    assert (view.threshold_at, view.hygiene_at) == (50.0, 85.0)
    assert view.level == level


def test_without_a_window_the_gauge_is_empty() -> None:
    view = gauge_view(_gauge(2_500, window=None))
    assert (view.used_width, view.threshold_at, view.hygiene_at) == (0.0, None, None)


def _viewer(scope: Scope) -> Viewer:
    session_id, session = new_session("hbk_abcdefgh", 60)
    return Viewer(Caller("hbk_abcdefgh", "acme", scope), session_id, session)


def test_a_write_needs_the_sessions_token_and_an_admin_key() -> None:
    admin, reader = _viewer(Scope.ADMIN), _viewer(Scope.READ)
    check_write(admin, admin.session.csrf)
    for token in ("", "x", reader.session.csrf):
        with pytest.raises(Refused, match="did not come from the console") as refused:
            check_write(admin, token)
        assert refused.value.status == 403
    check_csrf(reader, reader.session.csrf)  # signing out is not a change
    with pytest.raises(Refused, match="read-only"):
        check_write(reader, reader.session.csrf)


def test_memory_sessions_expire_and_are_deleted() -> None:
    store = MemorySessionStore()
    live_id, live = new_session("hbk_live0000", 60)
    dead_id, dead = new_session("hbk_dead0000", -1)
    store.put(live_id, live, 60)
    store.put(dead_id, dead, 60)
    assert store.get(live_id) == live
    assert store.get(dead_id) is None
    assert store.get("someone-else") is None
    store.delete(live_id)
    assert store.get(live_id) is None


def test_bars_scale_to_the_tallest_and_stay_apart() -> None:
    chart = bar_chart([("a", 10.0), ("b", 40.0), ("c", 0.0)], lambda v: f"{v:.0f} tokens")
    assert [b.height for b in chart.bars] == [10.0, 40.0, 0.0]
    assert [b.y for b in chart.bars] == [30.0, 0.0, 40.0]
    assert chart.peak == "40 tokens"
    assert all(b.width <= 6.0 for b in chart.bars)
    assert all(a.x + a.width < b.x for a, b in zip(chart.bars, chart.bars[1:], strict=False))
    assert bar_chart([], str).bars == []
