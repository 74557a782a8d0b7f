from __future__ import annotations

from datetime import date

from agent_core.context.summary_prompt import (
    SYSTEM_INSTRUCTIONS,
    PromptContext,
    merge_prompt,
    request_messages,
    summarize_prompt,
)

SECTIONS = (
    "## Historical Task Snapshot",
    "## Goal",
    "## Constraints & Preferences",
    "## Completed Actions",
    "## Active State",
    "## Blocked",
    "## Key Decisions",
    "## Resolved Questions",
    "## Pending User Asks",
    "## Relevant Files & Links",
)
CONTEXT = PromptContext(today=date(2026, 3, 14), budget_tokens=2_000)


class TestSummarizePrompt:
    def test_fresh_summary_has_the_template_and_turns(self):
        prompt = summarize_prompt("[USER]: hi", CONTEXT)
        for section in SECTIONS:
            assert section in prompt
        assert prompt.endswith("TURNS:\n[USER]: hi")
        assert "2026-03-14" in prompt
        assert "2,000 tokens" in prompt
        assert "## Participants" not in prompt

    def test_update_carries_the_previous_summary(self):
        prompt = summarize_prompt("[USER]: new", CONTEXT, previous="## Goal\nold")
        assert "PREVIOUS SUMMARY:\n## Goal\nold" in prompt
        assert "NEW TURNS:\n[USER]: new" in prompt
        assert "Update" in prompt

    def test_part_of_a_longer_stretch(self):
        assert "part 2 of 5" in summarize_prompt("x", CONTEXT, part=(2, 5))

    def test_group_chat_names_people(self):
        context = PromptContext(date(2026, 3, 14), 2_000, participants=("alice", "bob"))
        prompt = summarize_prompt("x", context)
        assert "## Participants" in prompt
        assert 'group chat ("alice", "bob")' in prompt
        assert "Attribute" in prompt

    def test_many_participants_are_counted_not_listed(self):
        names = tuple(f"p{i}" for i in range(40))
        prompt = summarize_prompt("x", PromptContext(date(2026, 3, 14), 2_000, participants=names))
        assert "p29" in prompt
        assert "p30" not in prompt
        assert "and 10 others" in prompt

    def test_focus_topic(self):
        context = PromptContext(date(2026, 3, 14), 2_000, focus_topic="the billing bug")
        assert 'FOCUS TOPIC (the user\'s words): "the billing bug"' in summarize_prompt(
            "x", context
        )

    def test_ledger_is_not_asked_for(self):
        assert 'Do not write a "Critical Identifiers" section' in summarize_prompt("x", CONTEXT)


class TestMergePrompt:
    def test_numbered_oldest_first(self):
        prompt = merge_prompt(["first", "second"], CONTEXT)
        assert prompt.index("SUMMARY 1 OF 2:\nfirst") < prompt.index("SUMMARY 2 OF 2:\nsecond")
        assert "later one wins" in prompt


class TestRequestMessages:
    def test_system_then_user(self):
        assert request_messages("p") == [
            {"role": "system", "content": SYSTEM_INSTRUCTIONS},
            {"role": "user", "content": "p"},
        ]
