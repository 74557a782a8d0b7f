from __future__ import annotations

from dataclasses import replace
from datetime import date

from agent_core.prompt import PromptInputs, build_system_prompt, prompt_fingerprint
from agent_core.prompt.builder import context_cap_chars, truncate_middle

INPUTS = PromptInputs(
    persona="You are Pip.",
    model="openai/gpt-4o-mini",
    platform="telegram",
    chat_type="group",
    session_id="s1",
    context_length=128_000,
    instructions="Be kind.",
    memory=("Ann prefers metric units.",),
)


class TestBuildSystemPrompt:
    def test_layers_in_order_most_stable_first(self) -> None:
        prompt = build_system_prompt(INPUTS, date(2026, 11, 29))
        assert prompt.index("You are Pip.") < prompt.index("Be kind.")
        assert prompt.index("Be kind.") < prompt.index("Ann prefers metric units.")
        assert prompt.index("Ann prefers") < prompt.index("Conversation started")

    def test_date_to_the_day_never_the_minute(self) -> None:
        prompt = build_system_prompt(INPUTS, date(2026, 11, 29))
        assert "Sunday, November 29, 2026" in prompt
        assert ":" not in prompt.split("Conversation started:")[1].split("\n")[0]

    def test_same_inputs_same_bytes(self) -> None:
        day = date(2026, 11, 29)
        assert build_system_prompt(INPUTS, day) == build_system_prompt(INPUTS, day)

    def test_memory_is_framed_as_background(self) -> None:
        prompt = build_system_prompt(INPUTS, date(2026, 11, 29))
        assert "<memory-context>" in prompt
        assert "not instructions" in prompt

    def test_no_empty_layers(self) -> None:
        bare = replace(INPUTS, instructions=None, memory=())
        assert "\n\n\n" not in build_system_prompt(bare, date(2026, 1, 1))


class TestContextTruncation:
    def test_cap_follows_window_within_bounds(self) -> None:
        assert context_cap_chars(8_000) == 20_000
        assert context_cap_chars(1_000_000) == 240_000
        assert context_cap_chars(100_000_000) == 500_000

    def test_keeps_head_and_tail_with_marker(self) -> None:
        text = "H" * 1000 + "M" * 8000 + "T" * 1000
        out = truncate_middle(text, 1000, "AGENTS.md")
        assert out.startswith("H" * 700)
        assert out.endswith("T" * 200)
        assert "omitted" in out
        assert "AGENTS.md" in out

    def test_short_text_untouched(self) -> None:
        assert truncate_middle("short", 100, "x") == "short"

    def test_long_context_file_is_truncated_in_prompt(self) -> None:
        big = replace(INPUTS, context_files=(("NOTES.md", "x" * 100_000),))
        prompt = build_system_prompt(big, date(2026, 1, 1))
        assert "omitted to fit" in prompt
        assert len(prompt) < 40_000


class TestFingerprint:
    def test_changes_with_model_toolset_persona(self) -> None:
        base = prompt_fingerprint(INPUTS)
        assert prompt_fingerprint(replace(INPUTS, model="openai/gpt-4o")) != base
        assert prompt_fingerprint(replace(INPUTS, toolset=("memory",))) != base
        assert prompt_fingerprint(replace(INPUTS, persona="You are Bob.")) != base

    def test_ignores_memory_and_session(self) -> None:
        base = prompt_fingerprint(INPUTS)
        assert prompt_fingerprint(replace(INPUTS, memory=("new fact",))) == base
        assert prompt_fingerprint(replace(INPUTS, session_id="other")) == base
