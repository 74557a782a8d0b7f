from __future__ import annotations

import pytest

from agent_core.context.compressor import ContextCompressor
from agent_core.context.registry import (
    _ENGINES,
    DEFAULT_ENGINE,
    available_engines,
    create_engine,
    register_engine,
)
from agent_core.context.state import EngineState
from agent_core.errors import ConfigError


@pytest.fixture
def clean_registry():
    saved = dict(_ENGINES)
    yield
    _ENGINES.clear()
    _ENGINES.update(saved)


class TestRegistry:
    def test_default_is_the_compressor(self, settings, main_model):
        state = EngineState(compression_count=3)
        engine = create_engine(DEFAULT_ENGINE, settings, model=main_model, state=state)
        assert isinstance(engine, ContextCompressor)
        assert engine.state is state
        assert DEFAULT_ENGINE == "compressor"

    def test_unknown_name(self, settings, main_model):
        with pytest.raises(
            ConfigError, match="unknown context engine 'lcm'; choose one of: compressor"
        ):
            create_engine("lcm", settings, model=main_model)

    @pytest.mark.usefixtures("clean_registry")
    def test_plugins_are_chosen_by_name_only(self, settings, main_model):
        class Plugin(ContextCompressor):
            name = "plugin"

        register_engine("plugin", Plugin)
        assert available_engines() == ("compressor", "plugin")
        assert type(create_engine("plugin", settings, model=main_model)) is Plugin
        assert type(create_engine(DEFAULT_ENGINE, settings, model=main_model)) is ContextCompressor

    @pytest.mark.usefixtures("clean_registry")
    def test_names_are_unique(self):
        with pytest.raises(ValueError, match="already registered"):
            register_engine("compressor", ContextCompressor)
