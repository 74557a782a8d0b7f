from __future__ import annotations

import json

import pytest

from agent_core.context.media import IMAGE_PLACEHOLDER
from agent_core.context.pruning import (
    ARGUMENT_LEAF_KEEP_CHARS,
    MAX_TOOL_ARGUMENT_CHARS,
    dedupe_tool_results,
    digest_large_tool_results,
    prune,
    shorten_json_arguments,
    shorten_tool_call_arguments,
)
from tests.unit.agent_core.context.builders import (
    assistant,
    call,
    image_user,
    result,
    system,
    user,
)

BIG = "x" * 1_000


class TestDedupe:
    def test_older_copies_point_to_the_newest(self):
        messages = [
            call("a", "read_file", path="f"),
            result("a", BIG),
            call("b", "read_file", path="f"),
            result("b", BIG),
            call("c", "read_file", path="f"),
            result("c", BIG),
        ]
        rewritten = dedupe_tool_results(messages, 0, 5)
        assert set(rewritten) == {1, 3}
        assert "(call c)" in rewritten[1]["content"]
        assert "read_file" in rewritten[1]["content"]
        assert rewritten[1]["tool_call_id"] == "a"

    def test_newest_copy_in_the_tail_counts(self):
        messages = [call("a"), result("a", BIG), call("b"), result("b", BIG)]
        assert set(dedupe_tool_results(messages, 0, 2)) == {1}

    def test_short_or_different_results_stay(self):
        messages = [
            call("a"),
            result("a", "ok"),
            call("b"),
            result("b", "ok"),
            call("c"),
            result("c", BIG + "y"),
        ]
        messages += [call("d"), result("d", BIG)]
        assert dedupe_tool_results(messages, 0, 8) == {}


class TestDigest:
    def test_large_results_become_one_line(self):
        messages = [
            call("a", "terminal", command="npm test"),
            result("a", "line\n" * 47 + "exit 0"),
        ]
        rewritten = digest_large_tool_results(messages, 0, 2)
        assert rewritten[1]["content"] == "[terminal] ran `npm test` -> exit 0, 48 lines output"

    def test_only_inside_the_range(self):
        messages = [call("a"), result("a", BIG), call("b"), result("b", BIG)]
        assert set(digest_large_tool_results(messages, 0, 2)) == {1}

    def test_small_results_stay(self):
        assert digest_large_tool_results([call("a"), result("a", "ok")], 0, 2) == {}


class TestShortenArguments:
    def test_stays_valid_json_with_structure(self):
        arguments = json.dumps(
            {"path": "a.py", "content": "y" * 5_000, "nested": [{"k": "z" * 900}]}
        )
        shortened = json.loads(shorten_json_arguments(arguments))
        assert shortened["path"] == "a.py"
        assert shortened["content"].startswith("y" * ARGUMENT_LEAF_KEEP_CHARS)
        assert "4,800 chars truncated" in shortened["content"]
        assert "chars truncated" in shortened["nested"][0]["k"]

    @pytest.mark.parametrize("raw", ['{"content": "' + "q" * 3_000, "not json at all " * 200])
    def test_invalid_json_becomes_valid_json(self, raw):
        value = json.loads(shorten_json_arguments(raw))
        assert "truncated_arguments" in value

    def test_only_long_calls_change(self):
        long_call = call("a", "write_file", path="a.py", content="c" * MAX_TOOL_ARGUMENT_CHARS)
        messages = [call("s", "terminal", command="ls"), long_call]
        rewritten = shorten_tool_call_arguments(messages, 0, 2)
        assert set(rewritten) == {1}
        arguments = rewritten[1]["tool_calls"][0]["function"]["arguments"]
        assert len(arguments) < 400
        assert json.loads(arguments)["path"] == "a.py"
        assert rewritten[1]["tool_calls"][0]["id"] == "a"


class TestPrune:
    def test_passes_compose_and_tail_and_system_stay(self):
        messages = [
            system(BIG),
            image_user("old"),
            call("a", "terminal", command="make"),
            result("a", BIG),
            user("now"),
            call("b", "terminal", command="make"),
            result("b", BIG),
        ]
        pruned = prune(messages, 1, 4)
        assert set(pruned.rewritten) == {1, 3}
        assert pruned.messages[0] is messages[0]
        assert pruned.messages[6] is messages[6]
        assert pruned.messages[1]["content"][1]["text"] == IMAGE_PLACEHOLDER
        # Dedupe ran first, so the old copy points to the newer one rather than a digest.
        assert "(call b)" in pruned.messages[3]["content"]
        assert messages[3]["content"] == BIG  # input untouched

    def test_nothing_to_prune(self):
        messages = [user("a"), assistant("b")]
        pruned = prune(messages, 0, 2)
        assert pruned.rewritten == {}
        assert all(p is m for p, m in zip(pruned.messages, messages, strict=True))
