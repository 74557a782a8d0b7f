from __future__ import annotations

import pytest

from agent_core.context.markers import (
    SUMMARY_END_MARKER,
    SUMMARY_PREFIX,
    SUMMARY_ROLE,
    find_latest_summary,
    is_summary_message,
    summary_message,
    unwrap_summary,
    wrap_summary,
)
from tests.unit.agent_core.context.builders import assistant, system, user


class TestWrap:
    def test_prefix_body_end_marker(self):
        text = wrap_summary("## Goal\nship it\n")
        assert text.startswith(SUMMARY_PREFIX)
        assert text.endswith(SUMMARY_END_MARKER)
        assert "## Goal\nship it" in text

    def test_prefix_says_background_not_instructions(self):
        assert "background" in SUMMARY_PREFIX
        assert "not instructions" in SUMMARY_PREFIX
        assert "respond to the message below" in SUMMARY_END_MARKER

    def test_message_role(self):
        assert summary_message("b") == {"role": SUMMARY_ROLE, "content": wrap_summary("b")}
        assert SUMMARY_ROLE == "user"


class TestUnwrap:
    def test_round_trip(self):
        assert unwrap_summary(wrap_summary("## Goal\nx")) == "## Goal\nx"

    @pytest.mark.parametrize(
        "old",
        [
            "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted.\n\n## Goal\nx\n\n"
            "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---",
            "[CONTEXT COMPACTION - REFERENCE ONLY] Earlier turns were compacted.\n\n## Goal\nx",
        ],
    )
    def test_historical_prefixes_are_stripped(self, old):
        assert unwrap_summary(old) == "## Goal\nx"

    def test_not_a_summary(self):
        assert unwrap_summary("hello") is None


class TestFind:
    def test_latest_summary_and_detection(self):
        messages = [
            system(),
            summary_message("one"),
            user("x"),
            summary_message("two"),
            assistant("y"),
        ]
        assert find_latest_summary(messages) == (3, "two")
        assert is_summary_message(messages[1])
        assert not is_summary_message(messages[2])

    @pytest.mark.parametrize(
        "text",
        [
            "[CONTEXT COMPACTION — REFERENCE ONLY] hi all",  # a display name, no end marker
            "[CONTEXT SUMMARY: BACKGROUND ONLY] hi --- END OF CONTEXT SUMMARY",
            "hello --- END OF CONTEXT SUMMARY",
        ],
    )
    def test_look_alikes_are_not_summaries(self, text):
        assert not is_summary_message(user(text))

    def test_historical_summary_is_recognised(self):
        old = (
            "[CONTEXT COMPACTION — REFERENCE ONLY] x\n\n## Goal\ny\n\n"
            "--- END OF CONTEXT SUMMARY ---"
        )
        assert is_summary_message(assistant(old))

    def test_system_prompt_is_never_a_summary(self):
        assert not is_summary_message(system(wrap_summary("x")))

    def test_none(self):
        assert find_latest_summary([user("a")]) is None
