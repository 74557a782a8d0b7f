from __future__ import annotations

from agent_core.llm.prompt_caching import apply_anthropic_cache_control, is_anthropic_model


def test_system_and_last_three() -> None:
    messages = [{"role": "system", "content": "sys"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)
    ]
    out = apply_anthropic_cache_control(messages, "1h")
    marked = [i for i, m in enumerate(out) if "cache_control" in str(m)]
    assert marked == [0, 4, 5, 6]
    assert out[0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert messages[0]["content"] == "sys", "input is not mutated"


def test_default_ttl_has_no_ttl_field() -> None:
    out = apply_anthropic_cache_control([{"role": "system", "content": "s"}], "5m")
    assert out[0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_model_detection() -> None:
    assert is_anthropic_model("anthropic/claude-3-5-sonnet-20240620")
    assert is_anthropic_model("openrouter/anthropic/claude-3.5-sonnet")
    assert not is_anthropic_model("openai/gpt-4o-mini")
