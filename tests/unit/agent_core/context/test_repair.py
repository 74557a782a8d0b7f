from __future__ import annotations

from agent_core.context.repair import MISSING_RESULT_STUB, repair_tool_pairs
from tests.unit.agent_core.context.builders import (
    assistant,
    call,
    calls,
    pairing_problems,
    result,
    user,
)


class TestRepair:
    def test_valid_transcript_is_unchanged(self):
        messages = [user("a"), call("x"), result("x"), assistant("b")]
        repaired = repair_tool_pairs(messages)
        assert repaired.sources == [0, 1, 2, 3]
        assert all(a is b for a, b in zip(repaired.messages, messages, strict=True))

    def test_orphan_results_are_dropped(self):
        messages = [result("gone"), user("a"), assistant("b")]
        repaired = repair_tool_pairs(messages)
        assert repaired.sources == [1, 2]

    def test_missing_results_are_stubbed(self):
        messages = [user("a"), calls([("x", "t", {}), ("y", "t", {})]), result("x"), user("b")]
        repaired = repair_tool_pairs(messages)
        assert repaired.sources == [0, 1, 2, None, 3]
        assert repaired.messages[3] == {
            "role": "tool",
            "tool_call_id": "y",
            "content": MISSING_RESULT_STUB,
        }
        assert pairing_problems(repaired.messages) == []

    def test_results_move_next_to_their_call(self):
        messages = [call("x"), user("meanwhile", "bob"), result("x"), assistant("done")]
        repaired = repair_tool_pairs(messages)
        assert repaired.sources == [0, 2, 1, 3]

    def test_result_before_its_call_is_dropped_and_stubbed(self):
        messages = [result("x"), call("x"), assistant("done")]
        repaired = repair_tool_pairs(messages)
        assert repaired.sources == [1, None, 2]

    def test_duplicate_results_keep_the_first(self):
        messages = [call("x"), result("x", "one"), result("x", "two")]
        assert repair_tool_pairs(messages).sources == [0, 1]

    def test_empty_and_idless_calls_are_removed(self):
        empty = {"role": "assistant", "content": "hi", "tool_calls": []}
        idless = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"function": {"name": "t", "arguments": "{}"}},
                {"id": "k", "function": {"name": "t", "arguments": "{}"}},
            ],
        }
        repaired = repair_tool_pairs([empty, idless, result("k")])
        assert "tool_calls" not in repaired.messages[0]
        assert [c["id"] for c in repaired.messages[1]["tool_calls"]] == ["k"]
        assert pairing_problems(repaired.messages) == []
