"""MCP servers' tools as Hubbub tools, exposed as ``<server>__<tool>``."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_core.tools.base import Tool, ToolContext, ToolOutput
from agent_core.tools.mcp.spec import McpServerSpec

log = logging.getLogger(__name__)

SEPARATOR = "__"
MAX_NAME = 64
"""The providers' limit on a function name."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class McpToolInfo:
    """One tool as a server lists it."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(EMPTY_SCHEMA))
    repeatable: bool = False
    """The server says so (``readOnlyHint`` or ``idempotentHint``): see ``Tool.repeatable``.

    A hint from the server's author; it only decides whether a call may run again after a
    crash, never what the model may call.
    """


class McpToolSource(Protocol):
    """Where MCP tools are listed and called (the process's pool)."""

    def list_tools(
        self, servers: Sequence[McpServerSpec]
    ) -> dict[McpServerSpec, list[McpToolInfo]]:
        """Each server's tools (the last known list, possibly empty, when it is down)."""
        ...

    def call_tool(self, server: McpServerSpec, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one tool; failures come back as error outputs, never as exceptions."""
        ...


def exposed_name(server: str, tool: str) -> str | None:
    """``<server>__<tool>`` made safe for providers; ``None`` if it cannot fit."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    return name if len(name) <= MAX_NAME and tool else None


class McpTool(Tool):
    """A tool of one MCP server; deferrable (many servers' schemas add up)."""

    deferrable = True

    def __init__(
        self, source: McpToolSource, server: McpServerSpec, info: McpToolInfo, name: str
    ) -> None:
        self._source = source
        self._server = server
        self._remote_name = info.name
        self.name = name
        self.description = info.description or f"{info.name} (from the {server.name} server)"
        schema = dict(info.input_schema or EMPTY_SCHEMA)
        schema.setdefault("type", "object")
        self.parameters = schema
        self.allowed_in_groups = server.groups
        self.repeatable = info.repeatable

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Forward the call to the server through the pool."""
        return self._source.call_tool(self._server, self._remote_name, arguments)


def mcp_tools(source: McpToolSource, servers: Sequence[McpServerSpec]) -> list[Tool]:
    """Every tool of ``servers`` (listed concurrently), named ``<server>__<tool>``."""
    tools: list[Tool] = []
    seen: set[str] = set()
    for server, infos in source.list_tools(servers).items():
        for info in infos:
            name = exposed_name(server.name, info.name)
            if name is None or name in seen:
                log.warning(
                    "MCP tool skipped: its name is too long or clashes",
                    extra={"server": server.name, "tool": info.name[:100]},
                )
                continue
            seen.add(name)
            tools.append(McpTool(source, server, info, name))
    return tools
