"""Deferral: past the listing budget, deferrable tools are reached through three bridges."""

from __future__ import annotations

import json

from agent_core.config import ToolSettings
from agent_core.tools.base import ToolContext
from agent_core.tools.deferral import BRIDGE_NAMES, catalogue_listing
from agent_core.tools.registry import ToolRegistry
from tests.unit.agent_core.tools.fakes import Echo, Remote, call


def remote_tools() -> list[Remote]:
    return [
        Remote(
            "gh__create_pull_request",
            "Open a pull request from a branch.",
            ("repo", "head", "base"),
        ),
        Remote("gh__list_issues", "List the open issues of a repository.", ("repo", "state")),
        Remote("weather__forecast", "The weather forecast for a city.", ("city",)),
        Remote("cal__add_event", "Put an event in the calendar.", ("title", "start")),
    ]


def names(reg: ToolRegistry) -> list[str]:
    return [t["function"]["name"] for t in reg.openai_tools()]


def test_under_the_budget_everything_is_offered_directly() -> None:
    reg = ToolRegistry([Echo(), *remote_tools()], context_length=128_000)
    assert not reg.deferred
    assert "gh__list_issues" in names(reg)
    assert not set(BRIDGE_NAMES) & set(names(reg))


def test_over_the_budget_only_core_tools_and_bridges_remain() -> None:
    direct = ToolRegistry([Echo(), *remote_tools()], context_length=128_000)
    reg = ToolRegistry([Echo(), *remote_tools()], context_length=8_000)  # 5 %: 400 tokens
    assert reg.deferred
    assert names(reg) == ["echo", *BRIDGE_NAMES]
    assert reg.schema_tokens() < direct.schema_tokens()
    assert "gh__list_issues" in reg.names(), "still reachable"
    search = next(t for t in reg.openai_tools() if t["function"]["name"] == "tool_search")
    assert "gh__create_pull_request" in search["function"]["description"]


def test_search_finds_the_right_tool_and_the_bridge_calls_it(ctx: ToolContext) -> None:
    tools = remote_tools()
    reg = ToolRegistry([Echo(), *tools], context_length=8_000)
    found = json.loads(
        reg.execute(call("tool_search", {"query": "open pull request"}), ctx).content
    )
    assert found[0]["name"] == "gh__create_pull_request"
    weather = json.loads(reg.execute(call("tool_search", {"query": "forecast city"}), ctx).content)
    assert weather[0]["name"] == "weather__forecast"

    described = json.loads(
        reg.execute(call("tool_describe", {"name": "weather__forecast"}), ctx).content
    )
    assert described["parameters"]["required"] == ["city"]

    out = reg.execute(
        call("tool_call", {"name": "weather__forecast", "arguments": {"city": "Oslo"}}), ctx
    )
    assert (out.is_error, out.content) == (False, "weather__forecast ran with [('city', 'Oslo')]")
    assert tools[2].calls == [{"city": "Oslo"}]


def test_the_bridge_validates_like_a_direct_call(ctx: ToolContext) -> None:
    tools = remote_tools()
    reg = ToolRegistry([*tools], context_length=8_000)
    out = reg.execute(call("tool_call", {"name": "weather__forecast", "arguments": {}}), ctx)
    assert out.is_error
    assert "'city' is a required property" in out.content
    unknown = reg.execute(call("tool_call", {"name": "nope"}), ctx)
    assert unknown.is_error
    assert "tool_search" in unknown.content
    assert tools[2].calls == []


def test_the_catalogue_is_rebuilt_from_each_registry() -> None:
    first = ToolRegistry(remote_tools(), context_length=8_000)
    second = ToolRegistry(remote_tools()[:1], context_length=8_000)
    assert first.names() != second.names()


def test_the_listing_shrinks_to_names_then_nothing() -> None:
    tools = remote_tools()
    assert ": Open a pull request" in catalogue_listing(tools, 1_000)
    names_only = catalogue_listing(tools, 30)
    assert names_only.startswith("gh__create_pull_request, ")
    assert catalogue_listing(tools, 2) == ""


def test_the_budget_is_a_setting() -> None:
    reg = ToolRegistry(
        remote_tools(), context_length=128_000, settings=ToolSettings(listing_budget=0.001)
    )
    assert reg.deferred
