"""The built-in tools: memory, archive search and recall, the time, stored-result paging."""

from __future__ import annotations

from agent_core.config import ToolSettings
from agent_core.tools.base import Tool
from agent_core.tools.builtins.clock import CurrentTimeTool
from agent_core.tools.builtins.memory import MemoryTool
from agent_core.tools.builtins.read_result import ReadToolResultTool
from agent_core.tools.builtins.search import RecallTool, SessionSearchTool

BUILTIN_NAMES = ("memory", "session_search", "recall", "current_time", "read_tool_result")


def builtin_tools(settings: ToolSettings) -> list[Tool]:
    """One instance of each built-in, configured by ``settings``."""
    return [
        MemoryTool(settings),
        SessionSearchTool(),
        RecallTool(),
        CurrentTimeTool(),
        ReadToolResultTool(settings),
    ]


__all__ = ("BUILTIN_NAMES", "builtin_tools")
