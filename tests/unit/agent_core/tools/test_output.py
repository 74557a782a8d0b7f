"""The tool-output ladder: per-tool truncation, stored results, the per-turn budget."""

from __future__ import annotations

import pytest

from agent_core.config import ToolSettings
from agent_core.tools.output import (
    PREVIEW_CHARS,
    RESULT_MAX_CHARS,
    RESULT_MIN_CHARS,
    TURN_MAX_CHARS,
    TURN_MIN_CHARS,
    OutputLimits,
    ToolResultDraft,
    fit_results,
    result_threshold_chars,
    truncate_output,
    turn_budget_chars,
)

LIMITS = OutputLimits(max_chars=50_000, max_lines=2_000, max_line_length=2_000)


class MemoryStore:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def put(self, *, tool_call_id: str, tool_name: str, content: str) -> str:
        ref = f"tr_{len(self.stored)}"
        self.stored[ref] = content
        return ref


class TestTruncate:
    def test_small_output_is_unchanged(self) -> None:
        assert truncate_output("hello\nworld", LIMITS) == "hello\nworld"

    def test_long_lines_are_cut_with_a_marker(self) -> None:
        out = truncate_output("x" * 5_000 + "\nshort", LIMITS)
        first, second = out.split("\n")
        assert len(first) <= 2_000
        assert "characters cut" in first
        assert second == "short"

    def test_too_many_lines_keep_head_and_tail(self) -> None:
        text = "\n".join(f"line {i}" for i in range(10_000))
        out = truncate_output(text, LIMITS).split("\n")
        assert len(out) <= 2_000
        assert out[0] == "line 0"
        assert out[-1] == "line 9999"
        assert any("lines omitted" in line for line in out)

    def test_too_many_characters_keep_head_and_tail(self) -> None:
        text = "HEAD" + "y" * 200_000 + "TAIL"
        out = truncate_output(text, OutputLimits(50_000, 2_000, 1_000_000))
        assert len(out) <= 50_000
        assert out.startswith("HEAD")
        assert out.endswith("TAIL")
        assert "characters omitted of 200,008" in out

    def test_is_idempotent(self) -> None:
        text = "\n".join("z" * 3_000 for _ in range(5_000))
        once = truncate_output(text, LIMITS)
        assert truncate_output(once, LIMITS) == once


class TestThresholds:
    @pytest.mark.parametrize(
        ("window", "single", "turn"),
        [
            (8_000, RESULT_MIN_CHARS, TURN_MIN_CHARS),
            (32_000, 19_200, 38_400),
            (128_000, 76_800, 153_600),
            (1_000_000, RESULT_MAX_CHARS, TURN_MAX_CHARS),
        ],
    )
    def test_follow_the_window_within_the_clamps(self, window: int, single: int, turn: int) -> None:
        assert result_threshold_chars(window) == single
        assert turn_budget_chars(window) == turn


def draft(i: int, size: int, *, storable: bool = True) -> ToolResultDraft:
    return ToolResultDraft(f"call_{i}", "t", chr(65 + i) * size, storable=storable)


class TestFitResults:
    def test_results_within_budget_stay_inline(self) -> None:
        store = MemoryStore()
        fitted = fit_results([draft(0, 1_000), draft(1, 2_000)], context_length=32_000, store=store)
        assert [f.content for f in fitted] == ["A" * 1_000, "B" * 2_000]
        assert store.stored == {}

    def test_a_single_large_result_is_stored_with_a_preview_and_ref(self) -> None:
        store = MemoryStore()
        (fitted,) = fit_results([draft(0, 30_000)], context_length=32_000, store=store)
        assert fitted.stored_ref == "tr_0"
        assert store.stored["tr_0"] == "A" * 30_000
        assert fitted.content.startswith("A" * PREVIEW_CHARS)
        assert 'read_tool_result(ref="tr_0", offset=1500)' in fitted.content
        assert fitted.original_chars == 30_000

    def test_the_turn_budget_spills_the_largest_first_until_it_fits(self) -> None:
        # 32k window: single threshold 19,200 chars, turn budget 38,400.
        sizes = [15_000, 18_000, 10_000, 9_000]
        store = MemoryStore()
        fitted = fit_results(
            [draft(i, s) for i, s in enumerate(sizes)], context_length=32_000, store=store
        )
        spilled = [f.tool_call_id for f in fitted if f.stored_ref]
        assert spilled == ["call_1"], "18k spilled first; 15k + 10k + 9k + preview fit"
        assert sum(len(f.content) for f in fitted) <= turn_budget_chars(32_000)
        assert [f.tool_call_id for f in fitted] == [f"call_{i}" for i in range(4)]

    def test_results_that_must_not_be_stored_stay_inline(self) -> None:
        store = MemoryStore()
        fitted = fit_results([draft(0, 30_000, storable=False)], context_length=32_000, store=store)
        assert fitted[0].stored_ref is None
        assert store.stored == {}

    def test_budgets_follow_settings(self) -> None:
        store = MemoryStore()
        settings = ToolSettings(result_budget=0.5)
        (fitted,) = fit_results(
            [draft(0, 30_000)], context_length=32_000, store=store, settings=settings
        )
        assert fitted.stored_ref is None, "64k-char threshold with a 50 % budget"
