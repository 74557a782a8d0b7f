"""The tools of one turn: assembled, offered to the model, and run without ever raising."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from agent_core import tracing
from agent_core.config import ToolSettings
from agent_core.sessions.transcript import GROUP
from agent_core.tokens import TokenCounter, rough_tokens
from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput
from agent_core.tools.builtins import builtin_tools
from agent_core.tools.deferral import BRIDGE_NAMES, bridge_tools
from agent_core.tools.mcp.spec import McpServerSpec
from agent_core.tools.mcp.tools import McpToolSource, mcp_tools
from agent_core.tools.output import OutputLimits, ToolResultDraft, truncate_output
from agent_core.tools.text import storable_text

log = logging.getLogger(__name__)

MAX_LISTED_NAMES = 30
"""How many tool names an "unknown tool" error lists."""


def bot_tool_patterns(bot_settings: dict[str, Any] | None) -> frozenset[str] | None:
    """A database bot's own allow-list (``bots.settings["tools"]``), or ``None`` to inherit."""
    value = (bot_settings or {}).get("tools")
    if value is None:
        return None
    return frozenset(str(pattern) for pattern in value)


def is_allowed(name: str, patterns: frozenset[str] | None) -> bool:
    """Whether a tool name passes an allow-list of names and ``fnmatch`` patterns."""
    return patterns is None or any(fnmatchcase(name, pattern) for pattern in patterns)


VALIDATOR_CACHE_SIZE = 1024


@lru_cache(maxsize=VALIDATOR_CACHE_SIZE)
def _validator(schema_json: str) -> Validator | None:
    """The compiled validator of a tool schema (its canonical JSON), ``None`` if invalid.

    Checking a schema against its metaschema costs more than validating the arguments;
    registries are built per turn, so the compiled form is kept for the process.
    """
    schema = json.loads(schema_json)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema)


class ToolRegistry:
    """The tools offered in one turn.

    Args:
        tools: every tool the turn may use, already filtered (chat type, allow-list).
        settings: output limits and the listing budget.
        context_length: the main model's window in tokens.
        counter: exact token counts for :meth:`schema_tokens` (rough estimate without).
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        settings: ToolSettings | None = None,
        context_length: int,
        counter: TokenCounter | None = None,
    ) -> None:
        self._settings = settings or ToolSettings()
        self._limits = OutputLimits.from_settings(self._settings)
        self._counter = counter
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools or tool.name in BRIDGE_NAMES:
                log.warning("duplicate tool name skipped", extra={"tool": tool.name})
                continue
            self._tools[tool.name] = tool
        self._validators: dict[str, Validator | None] = {}
        """Compiled per tool on first use; ``None`` for a schema that is not valid."""
        deferrable = [t for t in self._tools.values() if t.deferrable]
        budget = int(context_length * self._settings.listing_budget)
        self.deferred = bool(deferrable) and self._tokens(deferrable) > budget
        """Whether the deferrable tools sit behind the bridges this turn."""
        if self.deferred:
            core = [t for t in self._tools.values() if not t.deferrable]
            self._visible = [
                *core,
                *bridge_tools(deferrable, listing_budget_tokens=budget, runner=self._run),
            ]
        else:
            self._visible = list(self._tools.values())

    @classmethod
    def for_turn(
        cls,
        *,
        settings: ToolSettings,
        allowed: frozenset[str] | None,
        mcp: McpToolSource | None,
        servers: Sequence[McpServerSpec] = (),
        chat_type: str,
        context_length: int,
        counter: TokenCounter | None = None,
    ) -> ToolRegistry:
        """The registry for a turn: built-ins, then the MCP servers' tools, filtered.

        Args:
            settings: the tool settings (``Settings.tool_settings``).
            allowed: the bot's allow-list (its own, else ``HUBBUB_TOOLS``); ``None``: all.
            mcp: the process's MCP pool; ``None`` offers no MCP tools.
            servers: the MCP servers of the bot's tenant and the configuration file.
            chat_type: ``private`` or ``group``; tools not allowed in groups are left out.
            context_length: the main model's window in tokens.
            counter: exact token counts for :meth:`schema_tokens`.
        """
        tools: list[Tool] = list(builtin_tools(settings))
        if mcp is not None and servers:
            tools += mcp_tools(mcp, servers)
        offered = [
            t
            for t in tools
            if is_allowed(t.name, allowed) and (chat_type != GROUP or t.allowed_in_groups)
        ]
        return cls(offered, settings=settings, context_length=context_length, counter=counter)

    def _tokens(self, tools: Iterable[Tool]) -> int:
        text = json.dumps([t.openai_schema() for t in tools], separators=(",", ":"))
        return self._counter.count_recurring(text) if self._counter else rough_tokens(text)

    def names(self) -> tuple[str, ...]:
        """Every tool the model can reach this turn (directly or through a bridge), sorted."""
        return tuple(sorted(self._tools))

    def openai_tools(self) -> list[dict[str, Any]]:
        """What goes into the request's ``tools``: core tools, plus bridges when deferring."""
        return [tool.openai_schema() for tool in self._visible]

    def schema_tokens(self) -> int:
        """What :meth:`openai_tools` costs in the request, for the preflight estimate."""
        return self._tokens(self._visible) if self._visible else 0

    def execute(self, call: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run one OpenAI-format tool call. Never raises.

        Unknown tools, arguments that are not a JSON object or break the schema, refusals
        and handler failures all come back as ``ToolOutput(is_error=True)`` with a text
        the model can act on; outputs are made storable and truncated (ladder step 1).
        """
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        with tracing.nested("hubbub.tool") as span:
            tool = self._resolve(name)
            output = (
                ToolOutput(self._unknown(name), is_error=True)
                if tool is None
                else self._run(tool, function.get("arguments"), ctx)
            )
            if span.is_recording():
                span.set_attributes(
                    {
                        "gen_ai.tool.name": name,
                        "hubbub.known": tool is not None,
                        "hubbub.error": output.is_error,
                    }
                )
            return output

    def repeatable(self, call: dict[str, Any]) -> bool:
        """Whether running ``call`` again after a crash is harmless (``Tool.repeatable``)."""
        tool = self._resolve(str((call.get("function") or {}).get("name") or ""))
        return tool is None or tool.repeatable  # an unknown tool only answers an error

    def _resolve(self, name: str) -> Tool | None:
        # A deferred tool called by its own name (learnt from tool_search) runs as well.
        return next((t for t in self._visible if t.name == name), None) or self._tools.get(name)

    def execute_all(
        self, calls: Sequence[dict[str, Any]], ctx: ToolContext
    ) -> list[ToolResultDraft]:
        """:meth:`execute` for every call of one response, in order, ready for the ladder."""
        return [ToolResultDraft.of(call, self.execute(call, ctx)) for call in calls]

    def _unknown(self, name: str) -> str:
        offered = [t.name for t in self._visible][:MAX_LISTED_NAMES]
        return f"Unknown tool {name!r}. Tools you can call: {', '.join(offered) or 'none'}."

    def _run(self, tool: Tool, raw_arguments: Any, ctx: ToolContext) -> ToolOutput:
        arguments, problem = self._arguments(tool, raw_arguments)
        if problem is not None:
            return ToolOutput(problem, is_error=True)
        try:
            output = tool.call(arguments, ctx)
        except ToolError as exc:
            output = ToolOutput(str(exc), is_error=True)
        except Exception as exc:
            log.exception("tool failed", extra={"tool": tool.name, "error": type(exc).__name__})
            output = ToolOutput(
                f"The tool {tool.name} failed ({type(exc).__name__}); it may work if tried "
                "again later.",
                is_error=True,
            )
        content = storable_text(output.content)
        if output.storable:
            content = truncate_output(content, self._limits)
        return ToolOutput(content, output.is_error, output.storable)

    def _arguments(self, tool: Tool, raw: Any) -> tuple[dict[str, Any], str | None]:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raw = "{}"
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                return {}, f"The arguments for {tool.name} are not valid JSON ({exc.msg})."
        if not isinstance(raw, dict):
            return {}, f"The arguments for {tool.name} must be a JSON object."
        problem = self._schema_problem(tool, raw)
        if problem is not None:
            return {}, f"Invalid arguments for {tool.name}: {problem}."
        return raw, None

    def _schema_problem(self, tool: Tool, arguments: dict[str, Any]) -> str | None:
        if tool.name not in self._validators:
            key = json.dumps(tool.parameters, sort_keys=True, default=str)
            self._validators[tool.name] = _validator(key)
            if self._validators[tool.name] is None:
                # A server's broken schema: leave validation to the server.
                log.warning("tool schema is not valid JSON Schema", extra={"tool": tool.name})
        validator = self._validators[tool.name]
        if validator is None:
            return None
        error = best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{error.message}" + (f" (at {where})" if where else "")
