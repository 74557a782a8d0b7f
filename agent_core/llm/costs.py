"""What a model call cost: litellm's offline price map, then the operator's own prices.

litellm ships a price per token for the models it knows (read offline, see
``agent_core._offline``). ``HUBBUB_MODEL_COSTS`` names a YAML or JSON file for the others
(a local model, a proxy's alias), and overrides litellm where both know a model::

    openai/my-model: {input: 0.0000005, output: 0.0000015}
    ollama/llama3.1: {input: 0, output: 0}

A model neither knows costs 0 and is reported as unpriced, never a failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litellm
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_core.errors import ConfigError
from agent_core.llm.model import Usage

log = logging.getLogger(__name__)


class Price(BaseModel):
    """USD per token of one model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    """Prompt tokens served from the provider's cache; unset: the input price."""


@dataclass(frozen=True, slots=True)
class Cost:
    """A call's cost, and whether any price was known for its model."""

    usd: float
    known: bool


def _litellm_price(model: str) -> Price | None:
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises a bare Exception subclass for unmapped models
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return Price(
        input=float(prompt),
        output=float(completion),
        cached_input=info.get("cache_read_input_token_cost"),
    )


class CostTable:
    """Prices by model name: the operator's file first, then litellm's map.

    Args:
        prices: the operator's prices, by model string (``openai/my-model``).
    """

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self._prices = dict(prices or {})
        self._looked_up: dict[str, Price | None] = {}
        self._warned: set[str] = set()

    @classmethod
    def from_file(cls, path: Path | None) -> CostTable:
        """The table with the prices of ``path`` (YAML or JSON), or litellm's alone.

        Raises:
            ConfigError: the file cannot be read or is not a mapping of model to prices.
        """
        if path is None:
            return cls()
        try:
            text = path.read_text(encoding="utf-8")
            raw: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ConfigError(f"HUBBUB_MODEL_COSTS: cannot read {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(
                f"HUBBUB_MODEL_COSTS: {path} must map model names to "
                "{input: <USD per token>, output: <USD per token>}"
            )
        try:
            prices = {str(model): Price.model_validate(value) for model, value in raw.items()}
        except ValidationError as exc:
            raise ConfigError(f"HUBBUB_MODEL_COSTS: {path}: {exc}") from exc
        return cls(prices)

    def price(self, model: str) -> Price | None:
        """The model's price, or ``None`` when nobody knows it."""
        if model in self._prices:
            return self._prices[model]
        if model not in self._looked_up:
            self._looked_up[model] = _litellm_price(model)
        return self._looked_up[model]

    def cost(self, model: str, usage: Usage) -> Cost:
        """What ``usage`` cost on ``model``; unpriced models cost 0 (logged once per model)."""
        price = self.price(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning(
                    "no price for model; its usage is counted at cost 0 (set HUBBUB_MODEL_COSTS)",
                    extra={"model": model},
                )
            return Cost(0.0, known=False)
        return Cost(self.estimate(price, usage), known=True)

    @staticmethod
    def estimate(price: Price, usage: Usage) -> float:
        """USD of ``usage`` at ``price`` (cached prompt tokens at the cached price)."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = price.input if price.cached_input is None else price.cached_input
        return (
            (usage.prompt_tokens - cached) * price.input
            + cached * cached_price
            + usage.completion_tokens * price.output
        )
