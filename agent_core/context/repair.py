"""Phase 5: make tool calls and tool results pair up, so any provider accepts the transcript.

Providers reject a tool result whose call is gone ("No tool call found for ... call_id")
and an assistant tool call without its results, and they do so on every later request.
After a compaction (or on any transcript loaded from storage) this pass drops orphaned
results, moves each result right after the call it answers, and stubs missing ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.context.transcript import ChatMessage, Message, is_tool_result

MISSING_RESULT_STUB = (
    "[No result was kept for this tool call; it belongs to an earlier part of the conversation]"
)


@dataclass(frozen=True, slots=True)
class RepairResult:
    """The repaired transcript and where each of its messages came from."""

    messages: list[Message]
    sources: list[int | None]
    """Output position -> input index; ``None`` for a stubbed result."""


def _valid_calls(message: Message) -> tuple[list[Any], bool]:
    """The calls with a unique id, and whether any were dropped."""
    calls = message.get("tool_calls")
    seen: set[str] = set()
    kept: list[Any] = []
    for call in calls or ():
        call_id = call.get("id")
        if call_id and str(call_id) not in seen:
            seen.add(str(call_id))
            kept.append(call)
    return kept, len(kept) != len(calls or ())


def _clean_assistant(message: Message) -> tuple[Message, list[str]]:
    """The assistant message without empty or id-less calls, and its call ids."""
    if "tool_calls" not in message:
        return message, []
    calls, dropped = _valid_calls(message)
    if not calls:
        cleaned: ChatMessage = {k: v for k, v in message.items() if k != "tool_calls"}
        return cleaned, []
    if dropped:
        return {**message, "tool_calls": calls}, [str(c["id"]) for c in calls]
    return message, [str(c["id"]) for c in calls]


def repair_tool_pairs(messages: Sequence[Message]) -> RepairResult:
    """Every call followed directly by exactly its results; orphans dropped, gaps stubbed.

    A result is placed right after its call even if other messages (a group member
    talking while a tool ran) came in between; a result that precedes its call, or whose
    call no longer exists, is dropped; a second result for the same call is dropped.
    """
    results_by_call: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        if is_tool_result(message):
            results_by_call.setdefault(str(message.get("tool_call_id") or ""), []).append(index)
    placed: set[int] = set()
    out: list[Message] = []
    sources: list[int | None] = []
    for index, message in enumerate(messages):
        if is_tool_result(message):
            continue  # placed after its call, or an orphan
        if message.get("role") != "assistant":
            out.append(message)
            sources.append(index)
            continue
        cleaned, call_ids = _clean_assistant(message)
        out.append(cleaned)
        sources.append(index)
        for call_id in call_ids:
            result = next(
                (r for r in results_by_call.get(call_id, ()) if r > index and r not in placed),
                None,
            )
            if result is None:
                out.append(
                    {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT_STUB}
                )
                sources.append(None)
            else:
                placed.add(result)
                out.append(messages[result])
                sources.append(result)
    return RepairResult(out, sources)
