from __future__ import annotations

from agent_core.context.result import (
    CompressionDecision,
    CompressionOutcome,
    CompressionResult,
    DecisionReason,
    Strategy,
)
from tests.unit.agent_core.context.builders import user


class TestCompressionResult:
    def test_flags(self):
        done = CompressionResult(CompressionOutcome.COMPRESSED, [], ())
        aborted = CompressionResult(CompressionOutcome.ABORTED, [], ())
        assert done.applied
        assert not done.aborted
        assert aborted.aborted
        assert not aborted.applied

    def test_summary_text(self):
        message = user("[CONTEXT SUMMARY: BACKGROUND ONLY] x")
        with_summary = CompressionResult(
            CompressionOutcome.COMPRESSED, [user("a"), message], (0, None), summary_index=1
        )
        assert with_summary.summary_text == message["content"]
        assert CompressionResult(CompressionOutcome.ABORTED, [], ()).summary_text is None

    def test_then_translates_indices_to_the_first_input(self):
        # Input 0..5 -> first keeps [0, summary, 4, 5] and rewrites 4.
        rewritten_4 = user("pruned 4")
        first = CompressionResult(
            CompressionOutcome.COMPRESSED,
            [user("0"), user("S1"), rewritten_4, user("5")],
            (0, None, 4, 5),
            strategy=Strategy.SUMMARY,
            archived_indices=(1, 2, 3),
            rewritten={4: rewritten_4},
            tokens_before=600,
            tokens_after=300,
            identifiers_dropped=("a", "b"),
            summary_calls=1,
            max_summary_request_tokens=500,
        )
        # Second pass on first.messages: keeps [0, summary2, 5(rewritten)], archives 1 and 2.
        rewritten_5 = user("pruned 5")
        second = CompressionResult(
            CompressionOutcome.COMPRESSED,
            [user("0"), user("S2"), rewritten_5],
            (0, None, 3),
            strategy=Strategy.CHUNKED_SUMMARY,
            summary="S2",
            archived_indices=(1, 2),
            rewritten={3: rewritten_5},
            tokens_before=300,
            tokens_after=200,
            identifiers_carried=("b",),
            identifiers_dropped=("c",),
            summary_calls=3,
            max_summary_request_tokens=400,
        )
        combined = first.then(second)
        assert combined.sources == (0, None, 5)
        assert combined.archived_indices == (1, 2, 3, 4)
        assert combined.rewritten == {5: rewritten_5}
        assert (combined.tokens_before, combined.tokens_after) == (600, 200)
        assert combined.summary == "S2"
        assert combined.strategy is Strategy.CHUNKED_SUMMARY
        assert combined.identifiers_dropped == ("c", "a")
        assert (combined.summary_calls, combined.max_summary_request_tokens) == (4, 500)

    def test_then_with_an_unapplied_second_keeps_the_first(self):
        first = CompressionResult(CompressionOutcome.COMPRESSED, [user("x")], (0,), summary_calls=2)
        second = CompressionResult(
            CompressionOutcome.NO_SAVINGS, [user("x")], (0,), summary_calls=1
        )
        combined = first.then(second)
        assert combined.outcome is CompressionOutcome.COMPRESSED
        assert combined.summary_calls == 3


class TestDecision:
    def test_truthiness(self):
        assert CompressionDecision(True, DecisionReason.OVER_THRESHOLD, 10, 5)
        assert not CompressionDecision(False, DecisionReason.INEFFECTIVE, 10, 5)
