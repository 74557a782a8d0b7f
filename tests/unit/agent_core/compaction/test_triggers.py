"""Every compaction trigger's rule, on one measurement of the session."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_core.compaction.triggers import (
    BackgroundRing,
    Lines,
    SessionSize,
    Trigger,
    background_line,
    due,
    idle_line,
)
from agent_core.config import CompressionSettings
from agent_core.context import ContextCompressor, DecisionReason, EngineState
from tests.unit.agent_core.context.conftest import NOW, FixedClock
from tests.unit.agent_core.context.scripted import ScriptedModel

THRESHOLD = 64_000
HYGIENE = 108_800


def engine(state: EngineState | None = None, **settings: object) -> ContextCompressor:
    return ContextCompressor(
        CompressionSettings(**settings),  # type: ignore[arg-type]
        model=ScriptedModel("scripted/main", context_length=128_000),
        state=state,
        clock=FixedClock(),
    )


def size(tokens: int, messages: int = 100, calibration: float = 1.0) -> SessionSize:
    return SessionSize(counted_tokens=tokens, messages=messages, calibration=calibration)


def never() -> int:
    raise AssertionError("the rough estimate is computed only when the rule says yes")


class TestLines:
    def test_lines_of_a_128k_model(self):
        lines = Lines.of(engine())
        assert (lines.threshold, lines.hygiene, lines.message_limit) == (THRESHOLD, HYGIENE, 5_000)
        assert lines.background == background_line(THRESHOLD) == 57_600
        assert lines.ledger == 15_360
        assert lines.idle == idle_line(THRESHOLD, 15_360) == 25_600 + 15_360

    def test_a_session_just_compacted_with_a_full_ledger_is_under_the_idle_line(self):
        compressor = engine()
        # The longest tail (1.5x its budget), the prose's least share and a full ledger.
        fresh = int(1.5 * compressor.tail_budget_tokens) + 1_600 + 15_360
        assert fresh + 2_000 < Lines.of(compressor).idle

    def test_size_is_calibrated_to_the_providers_count(self):
        assert size(10_000, calibration=1.25).tokens == 12_500


class TestHygiene:
    def test_a_healthy_session_is_left_alone(self):
        decision = due(Trigger.HYGIENE, size(HYGIENE - 1), engine())
        assert not decision
        assert decision.reason is DecisionReason.BELOW_THRESHOLD

    def test_over_the_hygiene_line(self):
        assert due(Trigger.HYGIENE, size(HYGIENE), engine())

    def test_calibration_can_put_a_session_over(self):
        assert due(Trigger.HYGIENE, size(100_000, calibration=1.1), engine())

    def test_the_message_limit_holds_without_token_pressure(self):
        assert due(Trigger.HYGIENE, size(10, messages=300), engine(hard_message_limit=300))

    def test_runs_despite_the_anti_thrashing_stop(self):
        assert due(Trigger.HYGIENE, size(200_000), engine(EngineState(ineffective_count=5)))

    def test_a_summary_failure_cooldown_holds_it(self):
        cooling = EngineState(cooldown_until=NOW + timedelta(minutes=5))
        decision = due(Trigger.HYGIENE, size(200_000), engine(cooling))
        assert decision.reason is DecisionReason.COOLDOWN

    def test_disabled_compression_does_nothing(self):
        decision = due(Trigger.HYGIENE, size(500_000), engine(enabled=False))
        assert decision.reason is DecisionReason.DISABLED


class TestPreflight:
    def test_below_the_threshold_no_estimate_is_made(self):
        assert not due(Trigger.PREFLIGHT, size(THRESHOLD - 1), engine(), rough_transcript=never)

    def test_over_the_threshold(self):
        assert due(Trigger.PREFLIGHT, size(THRESHOLD), engine(), rough_transcript=lambda: 70_000)

    def test_defers_right_after_a_compaction(self):
        state = EngineState(awaiting_real_usage=True)
        decision = due(Trigger.PREFLIGHT, size(90_000), engine(state), rough_transcript=lambda: 1)
        assert decision.reason is DecisionReason.DEFERRED

    def test_defers_while_the_fit_is_proven_and_growth_is_small(self):
        state = EngineState(fit_proven=True, post_compaction_rough=60_000)
        small = due(Trigger.PREFLIGHT, size(70_000), engine(state), rough_transcript=lambda: 61_000)
        large = due(Trigger.PREFLIGHT, size(70_000), engine(state), rough_transcript=lambda: 90_000)
        assert small.reason is DecisionReason.DEFERRED
        assert large

    def test_anti_thrashing_stop_is_reported(self):
        decision = due(Trigger.PREFLIGHT, size(90_000), engine(EngineState(ineffective_count=2)))
        assert decision.reason is DecisionReason.INEFFECTIVE


class TestPostResponse:
    def test_the_engines_rule_at_its_threshold(self):
        assert not due(Trigger.POST_RESPONSE, size(THRESHOLD - 1), engine())
        assert due(Trigger.POST_RESPONSE, size(THRESHOLD), engine())

    def test_cooldown_holds_it(self):
        cooling = EngineState(cooldown_until=NOW + timedelta(minutes=5))
        assert not due(Trigger.POST_RESPONSE, size(90_000), engine(cooling))


class TestBetweenTurns:
    @pytest.mark.parametrize(
        ("trigger", "line"), [(Trigger.BACKGROUND, 57_600), (Trigger.IDLE, 40_960)]
    )
    def test_starts_at_its_line(self, trigger, line):
        assert not due(trigger, size(line - 1), engine())
        assert due(trigger, size(line), engine())

    def test_the_message_limit_starts_it_too(self):
        assert due(Trigger.BACKGROUND, size(10, messages=5_000), engine())

    def test_over_the_line_the_engine_still_decides(self):
        decision = due(Trigger.BACKGROUND, size(60_000), engine(EngineState(ineffective_count=2)))
        assert decision.reason is DecisionReason.INEFFECTIVE

    def test_disabled(self):
        assert not due(Trigger.IDLE, size(500_000), engine(enabled=False))


class TestProviderAndUser:
    def test_overflow_always_compacts_unless_disabled(self):
        assert due(Trigger.OVERFLOW, size(0), engine(EngineState(ineffective_count=9)))
        assert not due(Trigger.OVERFLOW, size(0), engine(enabled=False))

    def test_manual_always_compacts(self):
        assert due(Trigger.MANUAL, size(0), engine(enabled=False))


class TestBackgroundRing:
    ring = BackgroundRing(token_line=1_000, message_line=500)

    def test_rings_when_a_message_crosses_the_line(self):
        assert self.ring.should_ring(1_000, 999, count=7)
        assert not self.ring.should_ring(998, 990, count=7)

    def test_rings_again_every_fifty_messages_while_over(self):
        assert self.ring.should_ring(5_000, 4_990, count=100)
        assert not self.ring.should_ring(5_000, 4_990, count=101)

    def test_rings_at_the_message_limit(self):
        assert self.ring.should_ring(10, 9, count=500)

    def test_built_from_a_models_lines(self):
        ring = BackgroundRing.of(Lines.of(engine()))
        assert (ring.token_line, ring.message_line) == (57_600, 5_000)
