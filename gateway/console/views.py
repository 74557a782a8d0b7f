"""What the console's pages draw, computed from the admin API's answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.routes.admin import Gauge

GAUGE_FULL = 100.0
"""The gauge's SVG is drawn on a 0-100 scale: the model's window."""


@dataclass(frozen=True)
class GaugeView:
    """A session's context gauge: how full the window is and where its lines are."""

    gauge: Gauge
    used_width: float
    """Stored tokens, as a share of the window (0-100)."""
    threshold_at: float | None
    """The compressor's threshold, on the same scale."""
    hygiene_at: float | None
    """The hygiene line (compaction before the turn), on the same scale."""

    @property
    def level(self) -> str:
        """``ok`` under the threshold, ``high`` past it, ``over`` past the hygiene line."""
        used = self.gauge.stored_tokens
        if self.gauge.hygiene is not None and used >= self.gauge.hygiene:
            return "over"
        if self.gauge.threshold is not None and used >= self.gauge.threshold:
            return "high"
        return "ok"


def _share(part: int | None, window: int | None) -> float | None:
    if part is None or not window:
        return None
    return round(min(part / window, 1.0) * GAUGE_FULL, 2)


def gauge_view(gauge: Gauge) -> GaugeView:
    """The drawing of ``gauge``; without a known window the bar stays empty."""
    return GaugeView(
        gauge=gauge,
        used_width=_share(gauge.stored_tokens, gauge.window) or 0.0,
        threshold_at=_share(gauge.threshold, gauge.window),
        hygiene_at=_share(gauge.hygiene, gauge.window),
    )


def when(moment: datetime | None) -> str:
    """A stored UTC time as people read it: ``2026-12-02 04:37 UTC``, or a dash."""
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment is not None else "—"


def number(value: int | float | None) -> str:
    """``12,345``, or a dash when unknown."""
    return f"{value:,}" if value is not None else "—"


CHART_HEIGHT = 40.0
"""Bar charts are drawn on a 100 by 40 box, stretched to the page's width."""
BAR_GAP = 0.15
MAX_BAR_WIDTH = 6.0
"""A few bars stay slim, centred in their slots."""
"""The share of each bar's slot left empty, so neighbours stay apart."""


@dataclass(frozen=True)
class Bar:
    """One bar of a chart, with where the SVG draws it."""

    label: str
    value: float
    text: str
    """The value as people read it (``12,345 tokens``, ``$0.42``)."""
    x: float
    width: float
    height: float

    @property
    def y(self) -> float:
        """The bar's top (SVG's y grows downwards)."""
        return CHART_HEIGHT - self.height


@dataclass(frozen=True)
class BarChart:
    """Bars scaled to the tallest one."""

    bars: list[Bar]
    peak: str
    """The tallest bar's value, as people read it (the chart's scale)."""

    @property
    def height(self) -> float:
        """The drawing's height, for the template's viewBox."""
        return CHART_HEIGHT


def bar_chart(points: Sequence[tuple[str, float]], show: Callable[[float], str]) -> BarChart:
    """A chart of ``points`` (label, value), each value written by ``show``."""
    peak = max((value for _, value in points), default=0.0)
    slot = GAUGE_FULL / len(points) if points else GAUGE_FULL
    width = min(slot * (1 - BAR_GAP), MAX_BAR_WIDTH)
    bars = [
        Bar(
            label=label,
            value=value,
            text=show(value),
            x=round(i * slot + (slot - width) / 2, 3),
            width=round(width, 3),
            height=round(value / peak * CHART_HEIGHT, 3) if peak > 0 else 0.0,
        )
        for i, (label, value) in enumerate(points)
    ]
    return BarChart(bars=bars, peak=show(peak))
