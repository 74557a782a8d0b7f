"""The chat models a turn uses: the main model and the optional summary (auxiliary) model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from agent_core import tracing
from agent_core.config import Settings
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.llm.model import ChatModel
from agent_core.llm.vision import supports_vision
from agent_core.llm.wrapper import TracedModel

ModelFactory = Callable[[], ChatModel]


class ModelSet:
    """Builds fresh model clients per turn from the settings.

    Args:
        settings: the process settings.
        main: overrides how the main model is built (tests pass their own double).
        summary: overrides how the summary model is built (tests pass their own double).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        main: ModelFactory | None = None,
        summary: ModelFactory | None = None,
    ) -> None:
        self._settings = settings
        self._main = main or (lambda: LiteLLMModel(settings.llm))
        self._summary = summary

    def main(self) -> ChatModel:
        """The main model (its calls are spans when tracing is on).

        Raises:
            ConfigError: no model is configured.
        """
        return _traced(self._main())

    def sees_images(self, model: str) -> bool:
        """Whether ``model`` reads image parts (``HUBBUB_VISION_MODELS``, else litellm's map)."""
        return model in self._settings.vision_models or supports_vision(model)

    def summary(self) -> ChatModel | None:
        """The summary model, when one other than the main model is configured."""
        if self._summary is not None:
            return _traced(self._summary())
        settings = self._settings
        if not settings.compression_model:
            return None
        model = LiteLLMModel(
            replace(
                settings.llm,
                model=settings.compression_model,
                context_length=settings.compression_context_length,
                max_output_tokens=None,
            )
        )
        return _traced(model)


def _traced(model: ChatModel) -> ChatModel:
    """``model`` as it is, or wrapped in spans when tracing is on."""
    return TracedModel(model) if tracing.enabled() else model
