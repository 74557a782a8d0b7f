"""Small in-memory tools for registry tests."""

from __future__ import annotations

from typing import Any

from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput


class Echo(Tool):
    name = "echo"
    description = "Repeat the text back."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
        "required": ["text"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(arguments)
        return ToolOutput(arguments["text"] * int(arguments.get("times", 1)))


class Broken(Tool):
    name = "broken"
    description = "Always fails."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("secret internal detail")


class Refusing(Tool):
    name = "refusing"
    description = "Always refuses."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolError("Not today.")


class Remote(Tool):
    """A deferrable tool with a sizeable schema, like an MCP server's."""

    deferrable = True

    def __init__(self, name: str, description: str, params: tuple[str, ...] = ("query",)) -> None:
        self.name = name
        self.description = description
        self.parameters = {
            "type": "object",
            "properties": {
                p: {"type": "string", "description": f"The {p} to use. " + "detail " * 40}
                for p in params
            },
            "required": list(params),
        }
        self.calls: list[dict[str, Any]] = []

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(arguments)
        return ToolOutput(f"{self.name} ran with {sorted(arguments.items())}")


def call(name: str, arguments: Any = "{}", call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
