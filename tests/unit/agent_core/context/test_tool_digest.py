from __future__ import annotations

import json

import pytest

from agent_core.context.tool_digest import ARGUMENT_PREVIEW_CHARS, digest_tool_result


def _lines(n: int) -> str:
    return "\n".join(f"line {i}" for i in range(n))


class TestDigest:
    def test_terminal_with_exit_code(self):
        output = _lines(46) + "\nexit code: 0"
        digest = digest_tool_result("terminal", json.dumps({"command": "npm test"}), output)
        assert digest == "[terminal] ran `npm test` -> exit 0, 47 lines output"

    def test_terminal_json_exit_code(self):
        output = json.dumps({"returncode": 2, "stdout": "x"})
        digest = digest_tool_result("bash", '{"cmd": "make"}', output)
        assert digest == "[bash] ran `make` -> exit 2, 1 lines output"

    def test_terminal_without_exit_code(self):
        digest = digest_tool_result("shell", '{"command": "ls"}', "a\nb")
        assert digest == "[shell] ran `ls` -> 2 lines output"

    def test_read_file(self):
        digest = digest_tool_result("read_file", '{"path": "config.py", "offset": 1}', "x" * 3400)
        assert digest == "[read_file] read config.py from line 1 (3,400 chars)"

    @pytest.mark.parametrize(
        ("name", "arguments", "expected_start"),
        [
            ("write_file", {"path": "a.py", "content": "x"}, "[write_file] wrote a.py -> "),
            ("web_search", {"query": "hubbub"}, '[web_search] searched "hubbub" -> '),
            ("web_fetch", {"url": "https://e.com"}, "[web_fetch] fetched https://e.com -> "),
            ("lookup_user", {"id": 7}, "[lookup_user] called (id=7) -> "),
        ],
    )
    def test_other_tools(self, name, arguments, expected_start):
        assert digest_tool_result(name, json.dumps(arguments), "out\nput").startswith(
            expected_start
        )

    def test_invalid_arguments_are_tolerated(self):
        assert digest_tool_result("terminal", "{not json", "x").startswith("[terminal] ran `?`")

    def test_long_arguments_are_previewed(self):
        digest = digest_tool_result("terminal", json.dumps({"command": "x" * 500}), "")
        assert len(digest) < ARGUMENT_PREVIEW_CHARS + 60
        assert "…" in digest
