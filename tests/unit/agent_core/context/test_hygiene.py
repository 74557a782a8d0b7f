from __future__ import annotations

import pytest

from agent_core.config import CompressionSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.context.hygiene import HygieneTrigger, hygiene_threshold_tokens, session_hygiene
from agent_core.context.state import EngineState
from tests.unit.agent_core.context.builders import assistant, user
from tests.unit.agent_core.context.test_compressor import long_chat


@pytest.fixture
def engine(settings, main_model, aux_model, clock):
    return ContextCompressor(settings, model=main_model, summary_model=aux_model, clock=clock)


class TestSessionHygiene:
    def test_threshold_is_85_percent_of_the_window(self, engine):
        assert hygiene_threshold_tokens(engine) == 108_800

    def test_a_healthy_transcript_is_left_alone(self, engine, aux_model):
        messages = long_chat(120)
        found = session_hygiene(messages, engine)
        assert found.trigger is None
        assert found.compression is None
        assert aux_model.calls == []
        assert found.message_count == len(messages)

    def test_over_the_token_line(self, engine):
        messages = long_chat(120)
        found = session_hygiene(messages, engine, token_counts=[1_000] * len(messages))
        assert found.trigger is HygieneTrigger.TOKENS
        assert found.tokens == 121_000
        assert found.compression is not None
        assert found.compression.applied

    def test_known_tokens_count_when_larger(self, engine):
        found = session_hygiene(long_chat(120), engine, known_tokens=200_000)
        assert found.tokens == 200_000
        assert found.trigger is HygieneTrigger.TOKENS

    def test_hard_message_limit_without_token_pressure(self, main_model, aux_model, clock):
        engine = ContextCompressor(
            CompressionSettings(hard_message_limit=300),
            model=main_model,
            summary_model=aux_model,
            clock=clock,
        )
        messages = [user(f"hi {i}") if i % 2 == 0 else assistant(f"yo {i}") for i in range(300)]
        found = session_hygiene(messages, engine, token_counts=[20] * 300)
        assert found.trigger is HygieneTrigger.MESSAGE_LIMIT
        assert found.compression is not None
        assert found.compression.applied
        assert len(found.compression.messages) == 3 + 1 + 150  # head, summary, capped tail

    def test_runs_despite_the_anti_thrashing_stop(self, engine):
        engine.on_session_start(EngineState(ineffective_count=5))
        found = session_hygiene(long_chat(120), engine, known_tokens=200_000)
        assert found.compression is not None
        assert found.compression.applied

    def test_disabled_compression_does_nothing(self, main_model, aux_model):
        engine = ContextCompressor(
            CompressionSettings(enabled=False), model=main_model, summary_model=aux_model
        )
        found = session_hygiene(long_chat(120), engine, known_tokens=500_000)
        assert found.trigger is None
        assert found.compression is None
