"""Message builders and an independent validity check for transcripts in tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.context.transcript import SpokenMessage

Msg = dict[str, Any]


def system(text: str = "You are Hubbub.") -> Msg:
    return {"role": "system", "content": text}


def user(text: str, speaker: str | None = None) -> Msg:
    """A user message; with ``speaker``, a group member's (labelled as the transcript does)."""
    return SpokenMessage(speaker, text) if speaker else {"role": "user", "content": text}


def assistant(text: str | None = "ok") -> Msg:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str = "terminal", text: str | None = None, **arguments: Any) -> Msg:
    """An assistant message making one tool call."""
    return calls([(call_id, name, arguments)], text)


def calls(specs: Sequence[tuple[str, str, Mapping[str, Any]]], text: str | None = None) -> Msg:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(arguments))},
            }
            for call_id, name, arguments in specs
        ],
    }


def result(call_id: str, content: str = "done") -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def image_user(text: str = "look") -> Msg:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400}},
        ],
    }


def pairing_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a strict provider would reject: each call must be followed directly by exactly
    its results, and every result must answer such a call."""
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.get("role") == "tool":
            problems.append(f"orphan tool result at {index}")
            index += 1
            continue
        ids = (
            [c["id"] for c in message.get("tool_calls") or ()]
            if message.get("role") == "assistant"
            else []
        )
        if "tool_calls" in message and not message.get("tool_calls"):
            problems.append(f"empty tool_calls at {index}")
        index += 1
        answered: list[str] = []
        while index < len(messages) and messages[index].get("role") == "tool":
            answered.append(str(messages[index].get("tool_call_id")))
            index += 1
        if sorted(answered) != sorted(ids):
            problems.append(f"calls {ids} answered by {answered}")
    return problems
