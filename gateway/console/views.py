"""What the console's pages draw, computed from the admin API's answers."""

from __future__ import annotations

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
