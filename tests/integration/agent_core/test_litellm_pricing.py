"""litellm's own pricing of each answer stays cheap, and leaves Hubbub's prices alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import litellm
import pytest
from litellm.litellm_core_utils.llm_cost_calc import zero_cost_diagnostic

from agent_core.config import LLMSettings
from agent_core.llm.costs import CostTable
from agent_core.llm.litellm_model import LiteLLMModel
from tests.fixtures.llm_server import FakeLLM

pytestmark = pytest.mark.integration


def _counting(calls: list[str], wrapped: Callable[..., Any]) -> Callable[..., Any]:
    def search(*args: Any, **kwargs: Any) -> Any:
        calls.append("searched")
        return wrapped(*args, **kwargs)

    return search


def test_an_unpriced_model_s_answers_send_litellm_on_no_search_for_a_rate(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search costs ~2 ms of CPU per call: a local model's every turn paid it."""
    searched: list[str] = []
    monkeypatch.setattr(
        zero_cost_diagnostic,
        "_declares_a_rate",
        _counting(searched, zero_cost_diagnostic._declares_a_rate),
    )
    model = LiteLLMModel(
        LLMSettings(model="openai/unpriced-local", api_base=fake_llm.base_url, api_key="sk")
    )

    for _ in range(3):
        assert model.complete([{"role": "user", "content": "hello"}]).content

    assert searched == []
    assert CostTable().price("openai/unpriced-local") is None


def test_a_model_litellm_prices_keeps_its_price() -> None:
    before = litellm.get_model_info("gpt-4o-mini")["input_cost_per_token"]
    assert before

    LiteLLMModel(LLMSettings(model="gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="sk"))

    assert litellm.get_model_info("gpt-4o-mini")["input_cost_per_token"] == before
    price = CostTable().price("gpt-4o-mini")
    assert price is not None
    assert price.input == before
