from __future__ import annotations

import pytest

from agent_core.context.budget import summary_budget_tokens


class TestSummaryBudget:
    @pytest.mark.parametrize(
        ("compressed", "window", "expected"),
        [
            (50_000, 200_000, 10_000),  # 20 % of the content
            (1_000, 200_000, 2_000),  # floor
            (500_000, 1_000_000, 12_000),  # absolute ceiling
            (100_000, 128_000, 6_400),  # 5 % of the window
            (100_000, 20_000, 2_000),  # floor beats a tiny window's 5 %
        ],
    )
    def test_budget(self, compressed, window, expected):
        assert summary_budget_tokens(compressed, window) == expected

    @pytest.mark.parametrize(
        ("carried", "expected"),
        [
            (0, 2_000),  # nothing carried: the scaled budget
            (4_500, 4_500),  # an update keeps the room its predecessor's ledger needs
            (50_000, 6_400),  # but never past the ceiling
        ],
    )
    def test_an_update_keeps_room_for_what_it_carries(self, carried, expected):
        assert summary_budget_tokens(5_000, 128_000, carried_tokens=carried) == expected
