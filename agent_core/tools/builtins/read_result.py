"""``read_tool_result``: page through a result the ladder stored instead of inlining."""

from __future__ import annotations

from typing import Any

from agent_core.config import ToolSettings
from agent_core.db.engine import transaction
from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput
from agent_core.tools.output import result_threshold_chars
from agent_core.tools.results import ToolResultRepository
from agent_core.tools.text import storable_text

DEFAULT_PAGE_CHARS = 8_000
FOOTER_ROOM = 200


class ReadToolResultTool(Tool):
    """Its pages are never stored again (``storable=False``), or reading would loop."""

    repeatable = True

    name = "read_tool_result"
    description = (
        "Read part of a large tool result that was stored instead of shown, by its ref; "
        "continue from the offset the previous page ends at."
    )
    parameters = {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "minLength": 1, "maxLength": 64},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "default": DEFAULT_PAGE_CHARS},
        },
        "required": ["ref"],
        "additionalProperties": False,
    }

    def __init__(self, settings: ToolSettings) -> None:
        self._max_chars = settings.max_chars - FOOTER_ROOM

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """One page; a ref from another session or tenant reads nothing."""
        ref = storable_text(str(arguments["ref"]))
        offset = int(arguments.get("offset", 0))
        # A page stays under the sizes at which the ladder would truncate or store it.
        limit = min(
            int(arguments.get("limit", DEFAULT_PAGE_CHARS)),
            result_threshold_chars(ctx.context_length),
            self._max_chars,
        )
        with transaction(ctx.factory, durable=False) as db:
            stored = ToolResultRepository.from_session(db).get(
                ref, tenant_id=ctx.tenant_id, session_id=ctx.session_id
            )
            content = stored.content if stored is not None else None
        if content is None:
            raise ToolError(f"No stored tool result {ref!r} in this conversation.")
        if offset >= len(content) and content:
            raise ToolError(f"offset {offset} is past the end ({len(content):,} characters).")
        end = min(len(content), offset + limit)
        if end < len(content):
            footer = (
                f"[characters {offset:,}-{end:,} of {len(content):,}; continue with "
                f'read_tool_result(ref="{ref}", offset={end})]'
            )
        else:
            footer = f"[characters {offset:,}-{end:,} of {len(content):,}; end of the result]"
        return ToolOutput(f"{content[offset:end]}\n{footer}", storable=False)
