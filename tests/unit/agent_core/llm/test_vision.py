"""Which models are sent images: litellm's model map, plus the operator's own list."""

from __future__ import annotations

import pytest

from agent_core.config import Settings
from agent_core.llm.models import ModelSet


@pytest.mark.parametrize(
    ("model", "sees"),
    [
        ("openai/gpt-4o", True),
        ("openai/gpt-4o-mini", True),
        ("openai/gpt-3.5-turbo", False),
        ("openai/some-local-name", False),
    ],
)
def test_litellm_model_map_decides_by_default(model: str, sees: bool) -> None:
    assert ModelSet(Settings(model=model)).sees_images(model) is sees


def test_operators_name_vision_models_the_map_does_not_know() -> None:
    models = ModelSet(Settings(model="ollama/llava", vision_models="ollama/llava, vllm/qwen-vl"))
    assert models.sees_images("ollama/llava")
    assert models.sees_images("vllm/qwen-vl")
    assert not models.sees_images("ollama/llama3")
