"""Fixtures for the context engine's unit tests: scripted models, settings, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_core.config import CompressionSettings
from tests.unit.agent_core.context.scripted import ScriptedModel

NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


class FixedClock:
    """A clock tests move by hand."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def settings() -> CompressionSettings:
    return CompressionSettings()


@pytest.fixture
def main_model() -> ScriptedModel:
    return ScriptedModel("scripted/main", context_length=128_000)


@pytest.fixture
def aux_model() -> ScriptedModel:
    return ScriptedModel("scripted/aux", context_length=128_000)
