"""``memory``: remember, rewrite or forget a fact about the person or the chat."""

from __future__ import annotations

from typing import Any

from agent_core.config import ToolSettings
from agent_core.db.engine import transaction
from agent_core.db.models import MemoryScope
from agent_core.errors import InvalidInput
from agent_core.memory import service as memory
from agent_core.tools.base import Tool, ToolContext, ToolError, ToolOutput
from agent_core.tools.text import storable_text

_LATER = "It is saved now and shapes answers from the next session (or compaction) on."


class MemoryTool(Tool):
    """Durable at once; never changes the running session's frozen prompt."""

    name = "memory"
    description = (
        "Keep a durable fact for later conversations. scope 'user': about the person you are "
        "answering, used only in their private chats with you; scope 'chat': about this chat "
        "(in a group, shared by everyone in it). action 'add' stores content; 'replace' "
        "rewrites the entry containing old_text with content; 'remove' deletes the entry "
        "containing old_text. Keep entries short; facts, not conversation."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "content": {"type": "string", "description": "The fact (empty for remove)."},
            "old_text": {
                "type": "string",
                "description": "Part of the entry to replace or remove.",
                "default": "",
            },
            "scope": {"type": "string", "enum": ["user", "chat"], "default": "user"},
        },
        "required": ["action", "content"],
        "additionalProperties": False,
    }

    def __init__(self, settings: ToolSettings) -> None:
        self._limits = memory.MemoryLimits(
            settings.memory_max_entry_chars, settings.memory_max_entries
        )

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Apply the action in its own unit of work."""
        action = arguments["action"]
        scope = MemoryScope(arguments.get("scope") or "user")
        content = storable_text(arguments.get("content") or "")
        old_text = storable_text(arguments.get("old_text") or "")
        place = ctx.memory_place
        try:
            with transaction(ctx.factory) as db:
                if action == "add":
                    entry = memory.add(db, place, scope, content, self._limits)
                    text = "Already remembered." if entry is None else f"Remembered. {_LATER}"
                elif action == "replace":
                    memory.replace(db, place, scope, old_text, content, self._limits)
                    text = f"Updated. {_LATER}"
                else:
                    removed = memory.remove(db, place, scope, old_text or content)
                    text = f"Forgot: {removed!r}. {_LATER}"
        except InvalidInput as exc:
            raise ToolError(f"Memory unchanged: {exc}.") from exc
        return ToolOutput(text)
