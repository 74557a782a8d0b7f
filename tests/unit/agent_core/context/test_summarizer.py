from __future__ import annotations

import re
import threading
from datetime import date

import pytest

from agent_core.context.summarizer import (
    PLANNING_CHARS_PER_TOKEN,
    REQUEST_WINDOW_SHARE,
    RequestLimits,
    SummaryCalls,
    SummaryOutcome,
    pack,
    planning_tokens,
    request_limits,
    summarize,
)
from agent_core.context.summary_prompt import PromptContext
from agent_core.errors import ProviderBadRequest
from tests.unit.agent_core.context.scripted import ScriptedModel

CONTEXT = PromptContext(date(2026, 3, 14), budget_tokens=2_000)


def turns(n: int, size: int = 400) -> list[str]:
    return [f"[USER (p{i % 7})]: message {i} " + "w" * size for i in range(n)]


def echo_first_line(messages) -> str:
    """A summary that names the first turn it saw, so merges can be traced."""
    prompt = str(messages[-1]["content"])
    marker = prompt.find("message ")
    return f"## Goal\nsaw {prompt[marker : marker + 12]!r} and {len(prompt)} chars"


class TestLimits:
    def test_request_share_of_window(self):
        limits = request_limits(10_000, CONTEXT)
        assert limits.request_tokens == int(10_000 * REQUEST_WINDOW_SHARE)
        assert 0 < limits.instruction_tokens < 1_000
        assert limits.room == limits.request_tokens - limits.instruction_tokens

    def test_two_items_always_fit_one_request(self):
        limits = RequestLimits(request_tokens=5_000, instruction_tokens=1_000)
        assert 2 * (limits.item_tokens + 1) <= limits.room
        longest_output = limits.max_output_tokens * 4  # characters after the cut
        assert planning_tokens("x" * longest_output) <= limits.item_tokens

    @pytest.mark.parametrize(("window", "usable"), [(2_000, False), (8_192, True)])
    def test_usable(self, window, usable):
        assert request_limits(window, CONTEXT).usable is usable


class TestPack:
    @pytest.mark.parametrize(
        ("sizes", "room", "groups"),
        [
            ([3, 3, 3], 10, [range(0, 2), range(2, 3)]),
            ([3, 3, 3], 100, [range(0, 3)]),
            ([9, 9], 10, [range(0, 1), range(1, 2)]),
            ([], 10, []),
        ],
    )
    def test_groups(self, sizes, room, groups):
        assert pack(sizes, room) == groups


class TestSummaryCalls:
    def test_output_is_cut_to_the_budget(self):
        model = ScriptedModel("main", replies=["z" * 10_000])
        assert len(SummaryCalls(model).complete("p", 100)) == 400

    def test_passes_the_budget_and_records_the_size(self):
        model = ScriptedModel("main")
        models = SummaryCalls(model)
        models.complete("q" * 3_000, 321)
        assert model.calls[0].max_tokens == 321
        assert models.max_request_tokens >= 1_000

    def test_failure_is_raised(self):
        model = ScriptedModel("main", replies=[ProviderBadRequest("main", "no")])
        with pytest.raises(ProviderBadRequest):
            SummaryCalls(model).complete("p", 100)


class TestSummarize:
    def test_single_request_when_everything_fits(self):
        model = ScriptedModel("main", context_length=128_000)
        models = SummaryCalls(model)
        limits = request_limits(model.context_length, CONTEXT)
        outcome = summarize(
            turns(20), previous="## Goal\nold", context=CONTEXT, models=models, limits=limits
        )
        assert outcome.text is not None
        assert outcome.chunks == 1
        assert len(model.calls) == 1
        assert "PREVIOUS SUMMARY:\n## Goal\nold" in model.calls[0].prompt

    @pytest.mark.parametrize("window", [8_192, 16_000, 32_000])
    def test_every_request_fits_its_share_of_the_window(self, window):
        model = ScriptedModel("small", context_length=window, default=echo_first_line)
        models = SummaryCalls(model)
        limits = request_limits(window, CONTEXT)
        context = PromptContext(CONTEXT.today, min(CONTEXT.budget_tokens, limits.max_output_tokens))
        outcome = summarize(
            turns(600), previous="## Goal\nold", context=context, models=models, limits=limits
        )
        assert outcome.text is not None
        assert outcome.chunks > 1
        for request in model.calls:
            assert request.chars / PLANNING_CHARS_PER_TOKEN <= window * REQUEST_WINDOW_SHARE
        assert models.max_request_tokens <= window * REQUEST_WINDOW_SHARE

    def test_chunks_are_merged_with_the_previous_summary_first(self):
        model = ScriptedModel("small", context_length=8_192, default=echo_first_line)
        models = SummaryCalls(model)
        limits = request_limits(8_192, CONTEXT)
        context = PromptContext(CONTEXT.today, limits.max_output_tokens)
        summarize(
            turns(60), previous="## Goal\nPREVIOUS", context=context, models=models, limits=limits
        )
        part_prompts = [c.prompt for c in model.calls if "part " in c.prompt]
        assert "part 1 of" in part_prompts[0]
        assert "message 0 " in part_prompts[0]
        final = model.calls[-1].prompt
        assert final.startswith("Below are summaries")
        assert len(model.calls) == len(part_prompts) + 1
        assert f"SUMMARY 1 OF {len(part_prompts) + 1}:\n## Goal\nPREVIOUS" in final
        assert final.index("'message 0 ") < final.index(f"SUMMARY {len(part_prompts) + 1} OF")

    def test_merges_in_rounds_when_summaries_do_not_fit(self):
        model = ScriptedModel("small", context_length=8_192, default=lambda m: "s" * 100_000)
        models = SummaryCalls(model)
        limits = request_limits(8_192, CONTEXT)
        context = PromptContext(CONTEXT.today, limits.max_output_tokens)
        outcome = summarize(
            turns(300), previous=None, context=context, models=models, limits=limits
        )
        merges = [c for c in model.calls if c.prompt.startswith("Below are summaries")]
        assert outcome.text is not None
        assert len(merges) > 1  # hierarchical
        assert models.max_request_tokens <= limits.request_tokens

    def test_calls_grow_linearly_with_the_middle(self):
        def calls_for(n: int) -> int:
            model = ScriptedModel("small", context_length=8_192, default=lambda m: "s" * 100_000)
            models = SummaryCalls(model)
            limits = request_limits(8_192, CONTEXT)
            context = PromptContext(CONTEXT.today, limits.max_output_tokens)
            summarize(turns(n), previous=None, context=context, models=models, limits=limits)
            return len(model.calls)

        small, large = calls_for(200), calls_for(800)
        assert large <= 4 * small + 4

    def test_failure_is_returned_not_raised(self):
        model = ScriptedModel("main", replies=[ProviderBadRequest("main", "nope")])
        limits = request_limits(model.context_length, CONTEXT)
        outcome = summarize(
            turns(3),
            previous=None,
            context=CONTEXT,
            models=SummaryCalls(model),
            limits=limits,
        )
        assert outcome.text is None
        assert isinstance(outcome.error, ProviderBadRequest)


class GatedModel(ScriptedModel):
    """Holds each request until ``gather`` are in flight together (or a bound passes)."""

    def __init__(self, gather: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gather = gather
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._together = threading.Event()

    def complete(self, messages, *, tools=None, max_tokens=None, on_text=None):
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.peak >= self.gather:
                self._together.set()
        try:
            self._together.wait(timeout=10)
            return super().complete(messages, tools=tools, max_tokens=max_tokens, on_text=on_text)
        finally:
            with self._lock:
                self.in_flight -= 1


class TestConcurrency:
    def _summarize(self, model: ScriptedModel, concurrency: int, n: int = 300) -> SummaryOutcome:
        limits = request_limits(8_192, CONTEXT)
        context = PromptContext(CONTEXT.today, limits.max_output_tokens)
        return summarize(
            turns(n),
            previous="## Goal\nPREVIOUS",
            context=context,
            models=SummaryCalls(model),
            limits=limits,
            concurrency=concurrency,
        )

    def test_chunk_summaries_run_side_by_side_up_to_the_bound(self):
        model = GatedModel(4, name="small", context_length=8_192, default=echo_first_line)
        outcome = self._summarize(model, concurrency=4)
        assert outcome.text is not None
        assert outcome.chunks > 4
        assert model.peak == 4

    def test_one_at_a_time_when_the_bound_is_one(self):
        model = GatedModel(2, name="small", context_length=8_192, default=echo_first_line)
        model._together.set()  # nothing to wait for: the bound is what is tested
        self._summarize(model, concurrency=1)
        assert model.peak == 1

    def test_concurrent_summaries_keep_their_order_in_the_merge(self):
        model = ScriptedModel("small", context_length=8_192, default=echo_first_line)
        self._summarize(model, concurrency=4, n=60)
        final = model.calls[-1].prompt
        assert final.startswith("Below are summaries")
        assert "PREVIOUS" in final.split("SUMMARY 2 OF")[0]
        seen = [int(m) for m in re.findall(r"saw 'message (\d+)", final)]
        assert seen == sorted(seen)

    def test_a_failed_chunk_fails_the_summary(self):
        failing = ProviderBadRequest("small", "nope")

        def reply(messages):
            if "part 3 of" in str(messages[-1]["content"]):
                raise failing
            return echo_first_line(messages)

        model = ScriptedModel("small", context_length=8_192, default=reply)
        outcome = self._summarize(model, concurrency=4)
        assert outcome.text is None
        assert outcome.error is failing
