"""Anthropic prompt-cache breakpoints: the system prompt and the last three other messages."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

MAX_TRAILING_BREAKPOINTS = 3


def is_anthropic_model(model: str) -> bool:
    """Whether the model takes ``cache_control`` markers (Claude, directly or routed)."""
    lowered = model.lower()
    return lowered.startswith(("anthropic/", "bedrock/anthropic", "vertex_ai/claude")) or (
        "claude" in lowered
    )


def _marker(ttl: str) -> dict[str, str]:
    marker = {"type": "ephemeral"}
    if ttl != "5m":
        marker["ttl"] = ttl
    return marker


def _mark(message: dict[str, Any], ttl: str) -> None:
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": _marker(ttl)}]
    elif isinstance(content, list) and content:
        last = dict(content[-1])
        last["cache_control"] = _marker(ttl)
        message["content"] = [*content[:-1], last]
    else:
        message["cache_control"] = _marker(ttl)


def apply_anthropic_cache_control(
    messages: Sequence[Mapping[str, Any]], ttl: str = "5m"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` with the "system_and_3" breakpoints (four at most).

    The system prompt is byte-stable, so its breakpoint hits on every turn; the three
    trailing ones roll forward with the conversation.
    """
    out = [copy.deepcopy(dict(m)) for m in messages]
    if out and out[0].get("role") == "system":
        _mark(out[0], ttl)
    rest = [m for m in out if m.get("role") != "system"]
    for message in rest[-MAX_TRAILING_BREAKPOINTS:]:
        _mark(message, ttl)
    return out
