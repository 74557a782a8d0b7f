"""Phase 1: free pruning of old turns, before any model is asked to summarise.

Four passes over the messages outside the protected tail, none of which calls a model:
identical tool results are deduplicated (older copies point to the newer), large tool
results become one-line digests, over-long tool-call arguments are shortened inside the
parsed JSON (so they stay valid JSON a strict provider accepts), and images become
placeholders. System messages are never touched: the system prompt must stay byte-stable
for the prompt cache.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.context.media import without_images
from agent_core.context.tool_digest import digest_tool_result
from agent_core.context.transcript import (
    ChatMessage,
    Message,
    content_text,
    is_tool_result,
    tool_calls_by_id,
)

DEDUPE_MIN_CHARS = 200
"""Short results ("ok", "done") repeat naturally; only larger ones are worth a pointer."""
DIGEST_MIN_CHARS = 200
"""Tool results longer than this become one-line digests outside the tail."""
MAX_TOOL_ARGUMENT_CHARS = 2_000
"""A tool call whose argument JSON is longer than this has its long strings shortened."""
ARGUMENT_LEAF_MAX_CHARS = 500
ARGUMENT_LEAF_KEEP_CHARS = 200


def duplicate_pointer(tool_name: str, newer_call_id: str) -> str:
    """What an older copy of a repeated tool result is replaced with."""
    return (
        f"[Duplicate tool output: identical to the later {tool_name} result (call {newer_call_id})]"
    )


@dataclass(frozen=True, slots=True)
class PruneResult:
    """The transcript after pruning and which messages changed."""

    messages: list[Message]
    """The whole transcript; unchanged messages are the caller's own objects."""
    rewritten: dict[int, ChatMessage]
    """Index -> the pruned replacement, for every message that changed."""


Pass = Callable[[Sequence[Message], int, int], dict[int, ChatMessage]]


def dedupe_tool_results(
    messages: Sequence[Message], start: int, stop: int
) -> dict[int, ChatMessage]:
    """Point older copies of a repeated tool result (in ``[start, stop)``) to the newest one.

    The newest copy may sit anywhere, the protected tail included; it is never changed.
    """
    calls = tool_calls_by_id(messages)
    newest: dict[str, str] = {}  # text -> call id of its latest copy
    rewritten: dict[int, ChatMessage] = {}
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not is_tool_result(message):
            continue
        text = content_text(message.get("content"))
        if len(text) < DEDUPE_MIN_CHARS:
            continue
        call_id = str(message.get("tool_call_id") or "")
        if text not in newest:
            newest[text] = call_id
        elif start <= index < stop:
            name = calls.get(newest[text], (str(message.get("name") or "tool"), ""))[0]
            rewritten[index] = {**message, "content": duplicate_pointer(name, newest[text])}
    return rewritten


def digest_large_tool_results(
    messages: Sequence[Message], start: int, stop: int
) -> dict[int, ChatMessage]:
    """Replace tool results longer than :data:`DIGEST_MIN_CHARS` with one-line digests."""
    calls = tool_calls_by_id(messages)
    rewritten: dict[int, ChatMessage] = {}
    for index in range(start, stop):
        message = messages[index]
        if not is_tool_result(message):
            continue
        text = content_text(message.get("content"))
        if len(text) <= DIGEST_MIN_CHARS:
            continue
        name, arguments = calls.get(
            str(message.get("tool_call_id") or ""), (str(message.get("name") or "tool"), "{}")
        )
        rewritten[index] = {**message, "content": digest_tool_result(name, arguments, text)}
    return rewritten


def _shrink(value: Any) -> Any:
    """``value`` with every long string leaf cut, structure kept."""
    if isinstance(value, str) and len(value) > ARGUMENT_LEAF_MAX_CHARS:
        cut = len(value) - ARGUMENT_LEAF_KEEP_CHARS
        return f"{value[:ARGUMENT_LEAF_KEEP_CHARS]}…[{cut:,} chars truncated]"
    if isinstance(value, dict):
        return {key: _shrink(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shrink(item) for item in value]
    return value


def shorten_json_arguments(arguments: str) -> str:
    """A shorter argument string that is always valid JSON.

    Cutting the raw string would leave an unterminated literal, which strict providers
    reject on every later request; so the JSON is parsed, its long strings shortened and
    re-serialised. Unparseable arguments are wrapped as a JSON string preview.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return json.dumps({"truncated_arguments": _shrink(arguments)}, ensure_ascii=False)
    return json.dumps(_shrink(parsed), ensure_ascii=False)


def shorten_tool_call_arguments(
    messages: Sequence[Message], start: int, stop: int
) -> dict[int, ChatMessage]:
    """Shorten argument JSON longer than :data:`MAX_TOOL_ARGUMENT_CHARS` in assistant calls."""
    rewritten: dict[int, ChatMessage] = {}
    for index in range(start, stop):
        message = messages[index]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        new_calls: list[Any] = []
        changed = False
        for call in calls:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str) and len(arguments) > MAX_TOOL_ARGUMENT_CHARS:
                call = {
                    **call,
                    "function": {**function, "arguments": shorten_json_arguments(arguments)},
                }
                changed = True
            new_calls.append(call)
        if changed:
            rewritten[index] = {**message, "tool_calls": new_calls}
    return rewritten


def replace_old_images(
    messages: Sequence[Message], start: int, stop: int
) -> dict[int, ChatMessage]:
    """Placeholders for the images in ``[start, stop)``."""
    rewritten: dict[int, ChatMessage] = {}
    for index in range(start, stop):
        replaced = without_images(messages[index])
        if replaced is not None:
            rewritten[index] = replaced
    return rewritten


PASSES: tuple[Pass, ...] = (
    dedupe_tool_results,
    digest_large_tool_results,
    shorten_tool_call_arguments,
    replace_old_images,
)


def prune(messages: Sequence[Message], start: int, stop: int) -> PruneResult:
    """Run every pruning pass over ``[start, stop)``; each pass sees the previous one's output.

    Args:
        messages: the transcript.
        start: first index that may change (system messages before it stay untouched).
        stop: first index of the protected tail.
    """
    current: list[Message] = list(messages)
    rewritten: dict[int, ChatMessage] = {}
    for run in PASSES:
        for index, replacement in run(current, start, stop).items():
            if current[index].get("role") == "system":
                continue
            current[index] = replacement
            rewritten[index] = replacement
    return PruneResult(current, rewritten)
