"""The per-turn registry: what is offered, and calls that never raise."""

from __future__ import annotations

import json
import uuid

import pytest
from jsonschema import Draft202012Validator

from agent_core.config import ToolSettings
from agent_core.tokens import TokenCounter
from agent_core.tools.base import ToolContext, ToolOutput
from agent_core.tools.builtins import BUILTIN_NAMES
from agent_core.tools.mcp.spec import McpServerSpec
from agent_core.tools.mcp.tools import McpToolInfo
from agent_core.tools.registry import ToolRegistry, bot_tool_patterns, is_allowed
from tests.unit.agent_core.tools.fakes import Broken, Echo, Refusing, call

WINDOW = 128_000


class FakeSource:
    def __init__(self, tools: dict[McpServerSpec, list[McpToolInfo]]) -> None:
        self.tools = tools

    def list_tools(self, servers):
        return {s: self.tools[s] for s in servers}

    def call_tool(self, server, tool, arguments):
        return ToolOutput(f"{server.name}:{tool}")


def registry(*tools, **kwargs) -> ToolRegistry:
    return ToolRegistry(list(tools), context_length=WINDOW, **kwargs)


class TestOffered:
    def test_defaults_offer_every_builtin(self) -> None:
        reg = ToolRegistry.for_turn(
            settings=ToolSettings(), allowed=None, mcp=None, chat_type="private",
            context_length=WINDOW,
        )  # fmt: skip
        assert reg.names() == tuple(sorted(BUILTIN_NAMES))
        names = [t["function"]["name"] for t in reg.openai_tools()]
        assert sorted(names) == sorted(BUILTIN_NAMES)
        assert all(t["type"] == "function" for t in reg.openai_tools())
        assert not reg.deferred

    def test_the_allow_list_takes_names_and_patterns(self) -> None:
        reg = ToolRegistry.for_turn(
            settings=ToolSettings(), allowed=frozenset({"memory", "session_*"}), mcp=None,
            chat_type="group", context_length=WINDOW,
        )  # fmt: skip
        assert reg.names() == ("memory", "session_search")

    def test_mcp_tools_are_prefixed_and_kept_out_of_groups_when_asked(self) -> None:
        source = FakeSource(
            {
                McpServerSpec(owner="", name="docs", command="x"): [
                    McpToolInfo("search.docs", "Search the docs.", {"type": "object"})
                ],
                McpServerSpec(owner="", name="hr", command="y", groups=False): [
                    McpToolInfo("salaries", "Salary table.")
                ],
            }
        )
        private = ToolRegistry.for_turn(
            settings=ToolSettings(), allowed=frozenset({"*__*"}), mcp=source,
            servers=list(source.tools), chat_type="private", context_length=WINDOW,
        )  # fmt: skip
        assert private.names() == ("docs__search_docs", "hr__salaries")
        group = ToolRegistry.for_turn(
            settings=ToolSettings(), allowed=frozenset({"*__*"}), mcp=source,
            servers=list(source.tools), chat_type="group", context_length=WINDOW,
        )  # fmt: skip
        assert group.names() == ("docs__search_docs",)

    def test_bot_patterns(self) -> None:
        assert bot_tool_patterns({}) is None
        assert bot_tool_patterns({"tools": ["memory", "gh__*"]}) == frozenset({"memory", "gh__*"})
        assert is_allowed("gh__search", frozenset({"gh__*"}))
        assert not is_allowed("memory", frozenset())

    def test_schema_tokens_count_what_is_sent(self) -> None:
        reg = registry(Echo())
        text = json.dumps(reg.openai_tools(), separators=(",", ":"))
        assert reg.schema_tokens() == -(-len(text) // 4)

    def test_an_exact_listing_is_counted_once_for_every_turn_that_offers_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        counted: list[str] = []
        original = TokenCounter.count_text

        def counting(self: TokenCounter, text: str) -> int:
            counted.append(text)
            return original(self, text)

        monkeypatch.setattr(TokenCounter, "count_text", counting)
        echo = Echo()
        echo.description = f"only this run's {uuid.uuid4()}"
        sizes = [registry(echo, counter=TokenCounter()).schema_tokens() for _ in range(3)]
        listing = json.dumps(registry(echo).openai_tools(), separators=(",", ":"))
        assert sizes == [original(TokenCounter(), listing)] * 3
        assert counted.count(listing) == 1, "a fresh registry each turn, one count"


class TestExecute:
    def test_runs_a_valid_call(self, ctx: ToolContext) -> None:
        echo = Echo()
        out = registry(echo).execute(call("echo", '{"text": "ab", "times": 2}'), ctx)
        assert (out.content, out.is_error) == ("abab", False)
        assert echo.calls == [{"text": "ab", "times": 2}]

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "must be a JSON object"),
            ('{"times": 2}', "'text' is a required property"),
            ('{"text": "a", "times": 0}', "0 is less than the minimum of 1 (at times)"),
            ('{"text": "a", "extra": 1}', "Additional properties are not allowed"),
        ],
    )
    def test_bad_arguments_are_errors_and_never_reach_the_tool(
        self, ctx: ToolContext, arguments: str, expected: str
    ) -> None:
        echo = Echo()
        out = registry(echo).execute(call("echo", arguments), ctx)
        assert out.is_error
        assert expected in out.content
        assert echo.calls == []

    def test_dict_and_empty_arguments_are_accepted(self, ctx: ToolContext) -> None:
        echo = Echo()
        reg = registry(echo, Refusing())
        assert reg.execute(call("echo", {"text": "x"}), ctx).content == "x"
        assert reg.execute(call("refusing", ""), ctx).content == "Not today."

    def test_unknown_tool_names_what_exists(self, ctx: ToolContext) -> None:
        out = registry(Echo()).execute(call("nope"), ctx)
        assert out.is_error
        assert "Unknown tool 'nope'" in out.content
        assert "echo" in out.content

    def test_handler_exceptions_become_errors_without_details(
        self, ctx: ToolContext, caplog: pytest.LogCaptureFixture
    ) -> None:
        out = registry(Broken()).execute(call("broken"), ctx)
        assert out.is_error
        assert "RuntimeError" in out.content
        assert "secret internal detail" not in out.content
        assert "tool failed" in caplog.text

    def test_outputs_are_truncated_and_made_storable(self, ctx: ToolContext) -> None:
        reg = registry(Echo(), settings=ToolSettings(max_chars=1_000))
        out = reg.execute(call("echo", {"text": "a\x00b\ud800" + "z" * 5_000}), ctx)
        assert len(out.content) <= 1_000
        assert out.content.startswith("a\ufffdb\ufffd")
        assert "characters omitted" in out.content

    def test_execute_all_keeps_call_ids_in_order(self, ctx: ToolContext) -> None:
        drafts = registry(Echo()).execute_all(
            [call("echo", {"text": "1"}, "c1"), call("nope", "{}", "c2")], ctx
        )
        assert [(d.tool_call_id, d.name, d.is_error) for d in drafts] == [
            ("c1", "echo", False),
            ("c2", "nope", True),
        ]

    def test_a_schema_that_is_not_json_schema_leaves_checking_to_the_tool(
        self, ctx: ToolContext, caplog: pytest.LogCaptureFixture
    ) -> None:
        echo = Echo()
        echo.parameters = {"type": "object", "properties": {"text": {"type": 12}}}
        out = registry(echo).execute(call("echo", {"text": "as sent"}), ctx)
        assert (out.content, out.is_error) == ("as sent", False)
        assert "tool schema is not valid JSON Schema" in caplog.text

    def test_a_schema_is_checked_once_for_every_turn_that_offers_it(
        self, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        checked = []
        original = Draft202012Validator.check_schema.__func__

        def counting(cls, schema):
            checked.append(schema)
            return original(cls, schema)

        monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(counting))
        echo = Echo()
        echo.parameters = {**Echo.parameters, "description": f"only this run's {uuid.uuid4()}"}
        for text in ("one", "two", "three"):  # a fresh registry each turn
            assert registry(echo).execute(call("echo", {"text": text}), ctx).content == text
        assert len(checked) == 1
        assert registry(echo).execute(call("echo", {"times": 1}), ctx).is_error
