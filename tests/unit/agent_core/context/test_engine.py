from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from agent_core.config import CompressionSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.context.engine import MAX_INEFFECTIVE_COMPACTIONS
from agent_core.context.result import DecisionReason
from agent_core.context.state import EngineState
from agent_core.llm.model import Usage
from tests.unit.agent_core.context.conftest import NOW

THRESHOLD = 64_000  # 128k window


@pytest.fixture
def engine(settings, main_model, clock):
    return ContextCompressor(settings, model=main_model, clock=clock)


def just_compacted(before: int = 100_000) -> EngineState:
    return EngineState(
        compression_count=1, awaiting_real_usage=True, tokens_before_compaction=before
    )


class TestFields:
    def test_threshold_and_window(self, engine):
        assert engine.context_length == 128_000
        assert engine.threshold_tokens == THRESHOLD
        assert engine.tail_budget_tokens == int(THRESHOLD * 0.20)
        assert engine.last_prompt_tokens == 0
        assert engine.compression_count == 0


class TestLifecycle:
    def test_session_start_loads_state_and_end_forgets_it(self, engine):
        engine.on_session_start(EngineState(summary="s", compression_count=2))
        assert engine.compression_count == 2
        engine.on_session_end()
        assert engine.state == EngineState()

    def test_session_start_without_state_is_fresh(self, engine):
        engine.on_session_start(EngineState(compression_count=5))
        engine.on_session_start(None)
        assert engine.state == EngineState()


class TestUpdateFromResponse:
    def test_records_prompt_tokens_only(self, engine):
        engine.update_from_response(Usage(prompt_tokens=5_000, completion_tokens=90_000))
        assert engine.last_prompt_tokens == 5_000

    @pytest.mark.parametrize(
        ("after", "ineffective"),
        [(50_000, 0), (89_999, 0), (90_001, 2), (120_000, 2)],
    )
    def test_judges_the_last_compaction_on_real_tokens(self, engine, after, ineffective):
        engine.on_session_start(replace(just_compacted(100_000), ineffective_count=1))
        engine.update_from_response(Usage(prompt_tokens=after))
        assert engine.state.ineffective_count == ineffective
        assert not engine.state.awaiting_real_usage

    def test_only_the_first_usage_after_a_compaction_judges_it(self, engine):
        engine.on_session_start(just_compacted(100_000))
        engine.update_from_response(Usage(prompt_tokens=40_000))
        engine.update_from_response(Usage(prompt_tokens=99_000))
        assert engine.state.ineffective_count == 0

    def test_missing_usage_stops_waiting(self, engine):
        engine.on_session_start(just_compacted())
        engine.update_from_response(None)
        assert not engine.state.awaiting_real_usage
        assert engine.last_prompt_tokens == 0


class TestShouldCompress:
    @pytest.mark.parametrize(
        ("state", "tokens", "compress", "reason"),
        [
            (EngineState(), 70_000, True, DecisionReason.OVER_THRESHOLD),
            (EngineState(), 63_999, False, DecisionReason.BELOW_THRESHOLD),
            (
                EngineState(ineffective_count=MAX_INEFFECTIVE_COMPACTIONS),
                70_000,
                False,
                DecisionReason.INEFFECTIVE,
            ),
            (EngineState(ineffective_count=1), 70_000, True, DecisionReason.OVER_THRESHOLD),
            (
                EngineState(cooldown_until=NOW + timedelta(seconds=5)),
                70_000,
                False,
                DecisionReason.COOLDOWN,
            ),
            (
                EngineState(cooldown_until=NOW - timedelta(seconds=5)),
                70_000,
                True,
                DecisionReason.OVER_THRESHOLD,
            ),
        ],
    )
    def test_explicit_tokens(self, engine, state, tokens, compress, reason):
        engine.on_session_start(state)
        decision = engine.should_compress(tokens)
        assert (bool(decision), decision.reason) == (compress, reason)
        assert (decision.tokens, decision.threshold_tokens) == (tokens, THRESHOLD)

    def test_uses_the_last_real_count(self, engine):
        engine.update_from_response(Usage(prompt_tokens=80_000))
        assert engine.should_compress()

    def test_waits_for_real_usage_after_a_compaction(self, engine):
        engine.on_session_start(replace(just_compacted(), last_prompt_tokens=90_000))
        assert engine.should_compress().reason is DecisionReason.AWAITING_REAL_USAGE

    def test_disabled(self, main_model, clock):
        engine = ContextCompressor(
            CompressionSettings(enabled=False), model=main_model, clock=clock
        )
        assert engine.should_compress(1_000_000).reason is DecisionReason.DISABLED


class TestDeferPreflight:
    def test_defers_right_after_a_compaction(self, engine):
        engine.on_session_start(just_compacted())
        assert engine.should_defer_preflight(1_000_000)

    def test_defers_small_growth_after_a_proven_fit(self, engine):
        engine.on_session_start(replace(just_compacted(), post_compaction_rough=30_000))
        engine.update_from_response(Usage(prompt_tokens=40_000))
        assert engine.state.fit_proven
        assert engine.should_defer_preflight(34_000)
        assert not engine.should_defer_preflight(40_000)

    def test_no_fit_proven_means_no_deferral(self, engine):
        engine.on_session_start(replace(just_compacted(), post_compaction_rough=30_000))
        engine.update_from_response(Usage(prompt_tokens=70_000))  # did not fit under threshold
        assert not engine.should_defer_preflight(30_000)

    def test_proof_expires_when_the_prompt_grows_past_the_threshold(self, engine):
        engine.on_session_start(replace(just_compacted(), post_compaction_rough=30_000))
        engine.update_from_response(Usage(prompt_tokens=40_000))
        engine.update_from_response(Usage(prompt_tokens=65_000))
        assert not engine.should_defer_preflight(30_000)

    def test_fresh_session_does_not_defer(self, engine):
        assert not engine.should_defer_preflight(100_000)
