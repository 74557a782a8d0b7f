"""Tool deferral: when tool schemas would crowd the window, reach them through three bridges.

Core tools (the built-ins) always stay in the ``tools`` array. When the schemas of the
deferrable ones (MCP tools) exceed the listing budget, they leave it and the model reaches
them through ``tool_search`` (BM25 over names, descriptions and top-level parameter names),
``tool_describe`` (one tool's full schema) and ``tool_call`` (run it, validated and limited
like a direct call). The catalogue is built from the turn's registry every time and never
cached, so it cannot drift from the tools that really exist (seed 000 §7.1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agent_core.tokens import rough_tokens
from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput
from agent_core.tools.bm25 import BM25

BRIDGE_NAMES = ("tool_search", "tool_describe", "tool_call")
SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 20
LISTING_DESCRIPTION_CHARS = 80
RESULT_DESCRIPTION_CHARS = 300

Runner = Callable[[Tool, Any, ToolContext], ToolOutput]
"""How the registry runs a tool: parse, validate, call, limit (the same path as direct)."""


def search_text(tool: Tool) -> str:
    """What BM25 indexes: the name (split into words), the description, parameter names.

    Schema bodies are left out on purpose: they add noise, not recall.
    """
    properties = tool.parameters.get("properties") or {}
    names = " ".join(str(name) for name in properties) if isinstance(properties, dict) else ""
    return f"{tool.name} {tool.description} {names}"


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def catalogue_listing(tools: Sequence[Tool], budget_tokens: int) -> str:
    """The catalogue inside ``tool_search``'s description, as much as the budget allows.

    Names with a short description; if that does not fit, names only; if even that does
    not fit, nothing (the search still finds everything).
    """
    full = "\n".join(
        f"- {t.name}: {_first_line(t.description, LISTING_DESCRIPTION_CHARS)}" for t in tools
    )
    if rough_tokens(full) <= budget_tokens:
        return full
    names = ", ".join(t.name for t in tools)
    return names if rough_tokens(names) <= budget_tokens else ""


class _Bridge(Tool):
    def __init__(self, catalogue: Sequence[Tool]) -> None:
        self._catalogue = {tool.name: tool for tool in catalogue}

    def _tool(self, name: str) -> Tool:
        tool = self._catalogue.get(name)
        if tool is None:
            raise ToolError(
                f"No tool named {name!r} in the catalogue; use tool_search to find one."
            )
        return tool


class ToolSearch(_Bridge):
    """Find deferred tools by keywords."""

    name = "tool_search"
    repeatable = True
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SEARCH_LIMIT,
                "default": SEARCH_LIMIT,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, catalogue: Sequence[Tool], listing: str) -> None:
        super().__init__(catalogue)
        self._order = list(catalogue)
        self._index = BM25([search_text(t) for t in self._order])
        self.description = (
            "Search more tools by keywords; then tool_describe one and tool_call it."
            + (f" Available:\n{listing}" if listing else "")
        )

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """The best matches, best first."""
        hits = self._index.top(str(arguments["query"]), int(arguments.get("limit", SEARCH_LIMIT)))
        found = [
            {
                "name": self._order[i].name,
                "description": _first_line(self._order[i].description, RESULT_DESCRIPTION_CHARS),
            }
            for i in hits
        ]
        if not found:
            return ToolOutput("No tool matches; try other words.")
        return ToolOutput(json.dumps(found, ensure_ascii=False))


class ToolDescribe(_Bridge):
    """One deferred tool's full schema."""

    name = "tool_describe"
    repeatable = True
    description = "The full description and parameter schema of a tool found by tool_search."
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}},
        "required": ["name"],
        "additionalProperties": False,
    }

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """The tool's OpenAI-format function definition."""
        tool = self._tool(str(arguments["name"]))
        return ToolOutput(json.dumps(tool.openai_schema()["function"], ensure_ascii=False))


class ToolCall(_Bridge):
    """Run a deferred tool by name."""

    name = "tool_call"
    description = "Call a tool found by tool_search with its arguments (an object)."
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "arguments": {"type": "object", "default": {}},
        },
        "required": ["name"],
        "additionalProperties": False,
    }

    def __init__(self, catalogue: Sequence[Tool], runner: Runner) -> None:
        super().__init__(catalogue)
        self._runner = runner

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Validated, run and limited exactly like a direct call."""
        tool = self._tool(str(arguments["name"]))
        return self._runner(tool, arguments.get("arguments", {}), ctx)


def bridge_tools(
    catalogue: Sequence[Tool], *, listing_budget_tokens: int, runner: Runner
) -> list[Tool]:
    """The three bridges over ``catalogue``."""
    listing = catalogue_listing(catalogue, listing_budget_tokens)
    return [ToolSearch(catalogue, listing), ToolDescribe(catalogue), ToolCall(catalogue, runner)]
