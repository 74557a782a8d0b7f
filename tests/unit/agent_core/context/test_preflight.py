from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent_core.config import CompressionSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.context.engine import ContextEngine
from agent_core.context.preflight import (
    MAX_PREFLIGHT_PASSES,
    post_response_tokens,
    preflight,
    request_rough_tokens,
)
from agent_core.context.result import CompressionOutcome, CompressionResult, DecisionReason
from agent_core.context.state import EngineState
from agent_core.context.transcript import Message
from agent_core.llm.model import Usage
from agent_core.tokens import estimate_request_tokens_rough
from tests.unit.agent_core.context.builders import assistant, system, user
from tests.unit.agent_core.context.test_compressor import long_chat

TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 4_000}}
    for i in range(70)
]


class DroppingEngine(ContextEngine):
    """Drops the first message per compaction, shrinking by ``shrink`` tokens each time."""

    name = "dropping"

    def __init__(self, *, threshold_window: int = 1_000) -> None:
        super().__init__(CompressionSettings(), context_length=threshold_window)
        self.received_counts: list[Sequence[int] | None] = []

    def compress(
        self, messages, *, current_tokens=None, focus_topic=None, force=False, token_counts=None
    ):
        self.received_counts.append(token_counts)
        kept = list(messages[1:])
        return CompressionResult(
            CompressionOutcome.COMPRESSED,
            kept,
            tuple(range(1, len(messages))),
            archived_indices=(0,),
            tokens_before=len(messages),
            tokens_after=len(kept),
            summary_calls=1,
        )

    def has_content_to_compress(self, messages: Sequence[Message], *, token_counts=None) -> bool:
        return len(messages) > 1


class TestRequestRoughTokens:
    def test_includes_system_prompt_and_tools(self):
        messages = [user("hi")]
        bare = request_rough_tokens(messages)
        assert bare == estimate_request_tokens_rough(messages)
        assert request_rough_tokens(messages, system_prompt="x" * 400) >= bare + 100
        assert request_rough_tokens(messages, tools=TOOLS) > bare + 60_000


class TestPreflight:
    def test_small_request_passes_untouched(self, settings, main_model):
        engine = ContextCompressor(settings, model=main_model)
        messages = [user("hi"), assistant("hello")]
        outcome = preflight(engine, messages)
        assert outcome.messages == messages
        assert outcome.passes == 0
        assert outcome.compression is None
        assert outcome.decision is not None
        assert outcome.decision.reason is DecisionReason.BELOW_THRESHOLD

    def test_tool_schemas_push_it_over(self, settings, main_model):
        engine = ContextCompressor(settings, model=main_model)
        messages = long_chat(120)[1:]
        assert not engine.should_compress(estimate_request_tokens_rough(messages))
        outcome = preflight(engine, messages, tools=TOOLS, system_prompt="You are Hubbub.")
        assert outcome.compression is not None
        assert outcome.compression.applied
        assert outcome.rough_tokens == request_rough_tokens(
            outcome.messages, tools=TOOLS, system_prompt="You are Hubbub."
        )
        assert outcome.rough_tokens < request_rough_tokens(
            messages, tools=TOOLS, system_prompt="You are Hubbub."
        )

    def test_stops_when_a_pass_makes_no_progress(self, settings, main_model):
        engine = ContextCompressor(settings, model=main_model)
        outcome = preflight(engine, long_chat(120)[1:], tools=TOOLS)
        # The second pass finds nothing left to compact; the first pass's result stands.
        assert outcome.passes == 2
        assert outcome.compression is not None
        assert outcome.compression.applied

    def test_at_most_three_passes(self):
        engine = DroppingEngine()
        messages = [user(f"m{i} " + "x" * 40_000) for i in range(10)]
        outcome = preflight(engine, messages, token_counts=list(range(10)))
        assert outcome.passes == MAX_PREFLIGHT_PASSES
        assert outcome.messages == messages[3:]
        assert outcome.compression is not None
        assert outcome.compression.archived_indices == (0, 1, 2)
        assert outcome.compression.sources == tuple(range(3, 10))
        assert outcome.compression.summary_calls == 3
        assert engine.received_counts == [list(range(10)), list(range(1, 10)), list(range(2, 10))]


class TestPostResponseTokens:
    def test_real_count_wins(self, settings, main_model):
        engine = ContextCompressor(settings, model=main_model)
        engine.update_from_response(Usage(prompt_tokens=12_345))
        assert post_response_tokens(engine, long_chat(10)) == 12_345

    def test_zero_while_awaiting_real_usage(self, settings, main_model):
        engine = ContextCompressor(
            settings, model=main_model, state=EngineState(awaiting_real_usage=True)
        )
        assert post_response_tokens(engine, long_chat(10)) == 0

    @pytest.mark.parametrize("system_prompt", [None, "You are Hubbub."])
    def test_rough_estimate_when_nothing_was_reported(self, settings, main_model, system_prompt):
        engine = ContextCompressor(settings, model=main_model)
        messages = [system(), user("x" * 4_000)]
        assert post_response_tokens(
            engine, messages, system_prompt=system_prompt
        ) == request_rough_tokens(messages, system_prompt=system_prompt)
