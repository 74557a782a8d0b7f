"""The chat models a turn uses: the session's model (with its fallbacks) and the summary model."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from agent_core import tracing
from agent_core.config import Settings
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.llm.model import ChatModel
from agent_core.llm.vision import supports_vision
from agent_core.llm.wrapper import TracedModel
from agent_core.tenancy.settings import ModelChoice, TenantDefaults, model_choice

ModelFactory = Callable[[], ChatModel]


class ModelSet:
    """The process's model clients, one per model chain, built on first use and kept.

    A chain is a model and ``HUBBUB_FALLBACK_MODELS``; building its Router costs far more
    than a turn's own work, so it is never done per turn.

    Args:
        settings: the process settings.
        main: overrides how the main model is built (tests pass their own double); it then
            stands for every model name.
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
        self._main = main
        self._summary = summary
        self._chains: dict[str, LiteLLMModel] = {}
        self._summary_model: LiteLLMModel | None = None
        self._lock = threading.Lock()

    def main(self, model: str | None = None) -> ChatModel:
        """``model`` (default: ``HUBBUB_MODEL``) and its fallbacks; spans when tracing is on.

        The caller has checked ``model`` against the allowed list.

        Raises:
            ConfigError: no model is configured.
        """
        if self._main is not None:
            return _traced(self._main())
        return _traced(self._chain(model or self._settings.model))

    def choice(self, tenant: TenantDefaults) -> ModelChoice:
        """The models a session of ``tenant`` may use, and its default."""
        return model_choice(tenant, self._settings)

    def _chain(self, model: str | None) -> LiteLLMModel:
        settings = self._settings
        if not model or not settings.model:
            return LiteLLMModel(settings.llm)  # raises the "no model configured" error
        with self._lock:
            found = self._chains.get(model)
            if found is None:
                llm = settings.llm
                if model != settings.model:
                    # HUBBUB_CONTEXT_LENGTH and HUBBUB_MAX_OUTPUT_TOKENS describe the main model.
                    llm = replace(
                        llm,
                        model=model,
                        fallbacks=tuple(m for m in settings.fallback_models if m != model),
                        context_length=None,
                        max_output_tokens=None,
                    )
                found = self._chains[model] = LiteLLMModel(llm)
            return found

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
        with self._lock:
            if self._summary_model is None:
                # Its fallback is the main model (FallbackModel), not the main model's chain.
                self._summary_model = LiteLLMModel(
                    replace(
                        settings.llm,
                        model=settings.compression_model,
                        fallbacks=(),
                        context_length=settings.compression_context_length,
                        max_output_tokens=None,
                    )
                )
            return _traced(self._summary_model)


def _traced(model: ChatModel) -> ChatModel:
    """``model`` as it is, or wrapped in spans when tracing is on."""
    return TracedModel(model) if tracing.enabled() else model
