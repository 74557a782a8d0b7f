"""Choose a context engine by name: the built-in compressor or a registered plugin.

A plugin is never picked up implicitly; configuration must name it.
"""

from __future__ import annotations

from typing import Protocol

from agent_core.config import CompressionSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.context.engine import ContextEngine
from agent_core.context.state import EngineState
from agent_core.errors import ConfigError
from agent_core.llm.model import ChatModel

DEFAULT_ENGINE = ContextCompressor.name


class EngineFactory(Protocol):
    """Builds an engine for one turn; an engine class with this constructor qualifies."""

    def __call__(
        self,
        settings: CompressionSettings,
        *,
        model: ChatModel,
        summary_model: ChatModel | None = None,
        state: EngineState | None = None,
    ) -> ContextEngine:
        """A fresh engine holding ``state``."""
        ...


_ENGINES: dict[str, EngineFactory] = {DEFAULT_ENGINE: ContextCompressor}


def register_engine(name: str, factory: EngineFactory) -> None:
    """Make ``factory`` selectable as ``name``.

    Raises:
        ValueError: ``name`` is already taken.
    """
    if name in _ENGINES:
        raise ValueError(f"a context engine named {name!r} is already registered")
    _ENGINES[name] = factory


def available_engines() -> tuple[str, ...]:
    """The names configuration may choose from."""
    return tuple(sorted(_ENGINES))


def create_engine(
    name: str,
    settings: CompressionSettings,
    *,
    model: ChatModel,
    summary_model: ChatModel | None = None,
    state: EngineState | None = None,
) -> ContextEngine:
    """The engine registered as ``name``, built for one turn.

    Raises:
        ConfigError: no engine has that name.
    """
    factory = _ENGINES.get(name)
    if factory is None:
        known = ", ".join(available_engines())
        raise ConfigError(f"unknown context engine {name!r}; choose one of: {known}")
    return factory(settings, model=model, summary_model=summary_model, state=state)
