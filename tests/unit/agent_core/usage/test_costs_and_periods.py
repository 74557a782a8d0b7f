"""Prices (litellm's offline map, the operator's file, unpriced models) and budget periods."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_core.config import ModelPrice, Settings
from agent_core.llm.costs import CostTable
from agent_core.llm.model import Usage
from agent_core.usage.periods import Period, window


class TestCosts:
    def test_litellm_prices_a_model_it_knows_offline(self) -> None:
        cost = CostTable().cost(
            "openai/gpt-4o-mini", Usage(prompt_tokens=1000, completion_tokens=100)
        )
        assert cost.known
        assert cost.usd == pytest.approx(1000 * 0.15e-6 + 100 * 0.6e-6)

    def test_an_operator_price_overrides_and_cached_tokens_use_their_price(self) -> None:
        table = CostTable({"openai/gpt-4o-mini": ModelPrice(input=1, output=2, cached_input=0.5)})
        usage = Usage(prompt_tokens=10, completion_tokens=3, cached_tokens=4)
        assert table.cost("openai/gpt-4o-mini", usage).usd == 6 * 1 + 4 * 0.5 + 3 * 2

    def test_an_unpriced_model_costs_nothing_and_says_so(self) -> None:
        cost = CostTable().cost("openai/no-such-model", Usage(prompt_tokens=5, completion_tokens=5))
        assert (cost.usd, cost.known) == (0.0, False)

    def test_the_prices_file_is_read_as_yaml_or_json(self, tmp_path: Path) -> None:
        yaml_file = tmp_path / "costs.yaml"
        yaml_file.write_text("ollama/llama3.1: {input: 0, output: 0.000001}\n")
        settings = Settings(model_costs=yaml_file)
        assert settings.model_prices == {"ollama/llama3.1": ModelPrice(input=0, output=0.000001)}
        json_file = tmp_path / "costs.json"
        json_file.write_text('{"a/b": {"input": 1e-6, "output": 2e-6}}')
        assert Settings(model_costs=json_file).model_prices["a/b"].output == 2e-6

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (None, "cannot read"),
            ("- just a list\n", "must map model names"),
            ("m: {input: 1}\n", "output"),
            ("m: {input: -1, output: 1}\n", "greater than or equal to 0"),
            ("m: {input: 1, output: 1, cost: 3}\n", "Extra inputs"),
        ],
    )
    def test_a_bad_prices_file_is_a_configuration_error(
        self, tmp_path: Path, content: str | None, message: str
    ) -> None:
        path = tmp_path / "costs.yaml"
        if content is not None:
            path.write_text(content)
        with pytest.raises(ValidationError, match="model_costs") as raised:
            Settings(model_costs=path)
        assert message in str(raised.value)


class TestPeriods:
    def test_a_day_is_midnight_to_midnight_in_the_zone(self) -> None:
        now = datetime(2026, 3, 10, 23, 30, tzinfo=UTC)  # 00:30 on the 11th in Paris
        day = window(Period.DAY, now, "Europe/Paris")
        assert day.label == "2026-03-11"
        assert day.start == datetime(2026, 3, 10, 23, 0, tzinfo=UTC)
        assert day.end == datetime(2026, 3, 11, 23, 0, tzinfo=UTC)

    def test_the_day_clocks_change_is_23_hours_long(self) -> None:
        day = window(Period.DAY, datetime(2026, 3, 29, 12, 0, tzinfo=UTC), "Europe/Paris")
        assert day.start == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
        assert day.end == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)

    def test_a_month_runs_to_the_first_of_the_next(self) -> None:
        month = window(Period.MONTH, datetime(2026, 12, 31, 12, 0, tzinfo=UTC), "UTC")
        assert month.label == "2026-12"
        assert month.start == datetime(2026, 12, 1, tzinfo=UTC)
        assert month.end == datetime(2027, 1, 1, tzinfo=UTC)
