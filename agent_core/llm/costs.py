"""What a model call cost: litellm's offline price map, then the operator's own prices.

litellm ships a price per token for the models it knows (read offline, see
``agent_core._offline``). ``HUBBUB_MODEL_COSTS`` names a YAML or JSON file for the others
(a local model, a proxy's alias), and overrides litellm where both know a model::

    openai/my-model: {input: 0.0000005, output: 0.0000015}
    ollama/llama3.1: {input: 0, output: 0}

A model neither knows costs 0 and is reported as unpriced, never a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent_core.config import ModelPrice
from agent_core.llm.model import Usage

log = logging.getLogger(__name__)


Price = ModelPrice


@dataclass(frozen=True, slots=True)
class Cost:
    """A call's cost, and whether any price was known for its model."""

    usd: float
    known: bool


_CATALOGUE: dict[str, Price | None] = {}
"""litellm's own price of each model looked up, read once per process."""


def remember_catalogue_prices(models: Iterable[str]) -> None:
    """Read litellm's prices of ``models`` now, before a Router is built for them.

    A Router writes its deployments into litellm's price map, an unknown model with a
    price of 0, which would make it look priced; what the map said before is kept.
    """
    for model in models:
        catalogue_price(model)


def catalogue_price(model: str) -> Price | None:
    """The price litellm's map gave ``model`` before any Router was built for it."""
    if model not in _CATALOGUE:
        _CATALOGUE[model] = _read_litellm_price(model)
    return _CATALOGUE[model]


def _read_litellm_price(model: str) -> Price | None:
    # Imported here: litellm takes seconds to import, and the CLI commands that only read
    # budgets (``hubbub budgets``, ``hubbub usage``) should not pay for it.
    import litellm

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

    def price(self, model: str) -> Price | None:
        """The model's price, or ``None`` when nobody knows it."""
        if model in self._prices:
            return self._prices[model]
        if model not in self._looked_up:
            self._looked_up[model] = catalogue_price(model)
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
