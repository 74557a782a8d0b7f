from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from agent_core.context.state import EngineState
from tests.unit.agent_core.context.conftest import NOW


class TestEngineState:
    def test_round_trip_through_json(self):
        state = EngineState(
            compression_count=2,
            ineffective_count=1,
            summary="## Goal\nx",
            summary_version=3,
            cooldown_until=NOW,
            cooldown_reason="summary failed",
            last_prompt_tokens=1234,
            awaiting_real_usage=True,
            tokens_before_compaction=99_000,
            post_compaction_rough=20_000,
            fit_proven=True,
        )
        assert EngineState.from_dict(json.loads(json.dumps(state.to_dict()))) == state

    def test_unknown_keys_are_ignored_and_missing_ones_default(self):
        assert EngineState.from_dict({"compression_count": 4, "from_the_future": 1}) == EngineState(
            compression_count=4
        )

    def test_naive_cooldown_is_refused(self):
        with pytest.raises(ValueError, match="time zone"):
            EngineState.from_dict({"cooldown_until": "2026-03-14T09:30:00"})

    @pytest.mark.parametrize(
        ("until", "cooling"),
        [
            (None, False),
            (NOW + timedelta(seconds=1), True),
            (NOW, False),
            (NOW - timedelta(1), False),
        ],
    )
    def test_in_cooldown(self, until: datetime | None, cooling: bool):
        assert EngineState(cooldown_until=until).in_cooldown(NOW) is cooling
