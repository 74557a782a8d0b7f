"""The agent's tools: the interface, the per-turn registry, built-ins, MCP, the output ladder.

The turn loop uses it like this::

    registry = ToolRegistry.for_turn(settings=..., allowed=..., mcp=pool, servers=...,
                                     chat_type=..., context_length=...)
    response = model.complete(messages, tools=registry.openai_tools())
    drafts = registry.execute_all(response.tool_calls, ctx)        # never raises
    with transaction(factory) as db:
        store = DatabaseResultStore(db, tenant_id=..., session_id=...)
        fitted = fit_results(drafts, context_length=..., store=store, settings=...)
        append_tool_exchange(db, chat_session, trigger, content=response.content,
                             tool_calls=response.tool_calls, results=fitted, counter=...)
"""

from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput
from agent_core.tools.mcp.pool import McpPool
from agent_core.tools.mcp.spec import McpServerSpec, config_specs, merge_servers
from agent_core.tools.output import (
    FittedResult,
    OutputLimits,
    ToolResultDraft,
    fit_results,
    truncate_output,
)
from agent_core.tools.registry import ToolRegistry, bot_tool_patterns
from agent_core.tools.results import DatabaseResultStore
from agent_core.tools.transcript import append_tool_exchange

__all__ = (
    "DatabaseResultStore",
    "FittedResult",
    "McpPool",
    "McpServerSpec",
    "OutputLimits",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultDraft",
    "append_tool_exchange",
    "bot_tool_patterns",
    "config_specs",
    "fit_results",
    "merge_servers",
    "truncate_output",
)
