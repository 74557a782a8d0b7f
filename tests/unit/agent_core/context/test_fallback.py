from __future__ import annotations

from agent_core.context.fallback import fallback_summary
from agent_core.tokens import rough_tokens


class TestFallbackSummary:
    def test_keeps_previous_and_recent_turns_in_order(self):
        turns = [f"[USER]: message {i}" for i in range(5)]
        text = fallback_summary(
            turns, previous="## Goal\nold goal", budget_tokens=2_000, reason="boom"
        )
        assert "boom" in text
        assert "## Previous Summary\n## Goal\nold goal" in text
        assert text.index("message 0") < text.index("message 4")
        assert "5 compacted turns" in text

    def test_stays_within_budget_and_says_what_is_omitted(self):
        turns = [f"[USER]: #{i} {'word ' * 60}" for i in range(500)]
        text = fallback_summary(turns, previous=None, budget_tokens=2_000, reason="x")
        assert rough_tokens(text) <= 2_000
        assert "earlier turns omitted" in text
        assert "#499 " in text  # the most recent turn is quoted

    def test_long_previous_summary_is_cut(self):
        text = fallback_summary([], previous="p" * 100_000, budget_tokens=2_000, reason="x")
        assert rough_tokens(text) < 1_200
