from __future__ import annotations

import pytest

from agent_core.tokens import (
    TokenCounter,
    encoding_name_for_model,
    estimate_request_tokens_rough,
    rough_tokens,
)


class TestRoughTokens:
    @pytest.mark.parametrize(("text", "expected"), [("", 0), ("abc", 1), ("abcd", 1), ("abcde", 2)])
    def test_four_chars_per_token_rounded_up(self, text: str, expected: int) -> None:
        assert rough_tokens(text) == expected

    def test_request_estimate_counts_tool_schemas(self) -> None:
        messages = [{"role": "user", "content": "hi"}]
        tools = [{"type": "function", "function": {"name": "x" * 400, "parameters": {}}}]
        assert (
            estimate_request_tokens_rough(messages, tools)
            > estimate_request_tokens_rough(messages) + 90
        )


class TestEncodingForModel:
    @pytest.mark.parametrize(
        ("model", "encoding"),
        [
            ("openai/gpt-4o-mini", "o200k_base"),
            ("gpt-4", "cl100k_base"),
            ("anthropic/claude-3-5-sonnet", "cl100k_base"),
            (None, "cl100k_base"),
            ("openai/fake-model", "cl100k_base"),
        ],
    )
    def test_family_or_default(self, model: str | None, encoding: str) -> None:
        assert encoding_name_for_model(model) == encoding


class TestTokenCounter:
    def test_loads_offline_and_counts(self) -> None:
        counter = TokenCounter("o200k_base")
        assert counter.count_text("hello world") == 2

    def test_special_token_text_is_ordinary(self) -> None:
        counter = TokenCounter()
        assert counter.count_text("<|endoftext|>") > 1

    def test_matches_litellm_formula(self) -> None:
        import litellm

        messages = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Bonjour, ça va? Привет!", "name": "ann"},
            {"role": "assistant", "content": "Fine."},
        ]
        counter = TokenCounter.for_model("gpt-4o")
        assert counter.count_messages(messages) == litellm.token_counter(
            model="gpt-4o", messages=messages
        )
