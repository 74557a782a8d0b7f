from __future__ import annotations

import pytest

from agent_core.context.threshold import (
    MINIMUM_THRESHOLD_TOKENS,
    compute_threshold_tokens,
)


class TestComputeThresholdTokens:
    @pytest.mark.parametrize(
        ("context_length", "ratio", "max_output", "expected"),
        [
            (200_000, 0.50, None, 100_000),
            (1_000_000, 0.50, None, 500_000),
            (128_000, 0.50, None, MINIMUM_THRESHOLD_TOKENS),  # floored at 64k
            (200_000, 0.50, 65_536, 67_232),  # output reservation comes off the window
            (64_000, 0.50, None, 54_400),  # floor reaches the window: 85 % of it
            (32_000, 0.50, None, 27_200),
            (200_000, 0.85, None, 170_000),
        ],
    )
    def test_threshold(self, context_length, ratio, max_output, expected):
        assert compute_threshold_tokens(context_length, ratio, max_output) == expected

    def test_reservation_larger_than_window_is_ignored(self):
        assert compute_threshold_tokens(100_000, 0.5, 150_000) == 64_000

    def test_always_below_the_usable_window(self):
        for window in (1, 2, 10, 1_000, 63_999, 64_000, 64_001, 75_000):
            threshold = compute_threshold_tokens(window)
            assert threshold >= 1
            assert threshold < window or window == 1

    @pytest.mark.parametrize(("window", "ratio"), [(0, 0.5), (-5, 0.5), (1000, 0.0), (1000, 1.5)])
    def test_rejects_nonsense(self, window, ratio):
        with pytest.raises(ValueError, match="must be"):
            compute_threshold_tokens(window, ratio)
