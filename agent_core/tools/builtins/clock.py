"""``current_time``: the minute, which the frozen prompt deliberately leaves out."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput


class CurrentTimeTool(Tool):
    """The prompt's date is to the day (prompt cache); this is how the model gets the minute."""

    repeatable = True

    name = "current_time"
    description = (
        "The current date and time. timezone: an IANA name such as Europe/Berlin; empty for "
        "the bot's default."
    )
    parameters = {
        "type": "object",
        "properties": {"timezone": {"type": "string", "default": ""}},
        "additionalProperties": False,
    }

    def __init__(self, clock: Any = None) -> None:
        self._now = clock or datetime.now

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Read the clock in the requested zone."""
        name = str(arguments.get("timezone") or "").strip() or ctx.timezone
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ToolError(
                f"Unknown time zone {name!r}; use an IANA name such as Europe/Berlin or UTC."
            ) from exc
        now = self._now(zone)
        offset = now.strftime("%z")
        return ToolOutput(
            f"{now:%Y-%m-%d %H:%M:%S} ({now:%A}) in {name}, UTC{offset[:3]}:{offset[3:]}"
        )
