"""The two in-loop triggers: preflight before a model call, and the post-response check.

Preflight works on a rough estimate that includes tool schemas (fifty tools can add tens
of thousands of tokens that a messages-only count misses). It compacts at most three
times and stops as soon as a pass makes no progress. Whether it runs at all (and whether
to defer to the provider's real count right after a compaction, when the rough estimate
is known to run high) is the preflight rule of ``agent_core.compaction.triggers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.context.engine import ContextEngine
from agent_core.context.result import CompressionDecision, CompressionResult
from agent_core.context.transcript import Message
from agent_core.tokens import estimate_request_tokens_rough, rough_message_tokens

MAX_PREFLIGHT_PASSES = 3

ToolSchemas = Sequence[Mapping[str, Any]]


def request_rough_tokens(
    messages: Sequence[Message],
    *,
    tools: ToolSchemas | None = None,
    system_prompt: str | None = None,
) -> int:
    """The rough size of the request the model will receive: system prompt and tools included."""
    prefix: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return estimate_request_tokens_rough([*prefix, *messages], tools)


def post_response_tokens(
    engine: ContextEngine,
    messages: Sequence[Message],
    *,
    tools: ToolSchemas | None = None,
    system_prompt: str | None = None,
) -> int:
    """The prompt size to judge after a response: the real count when there is one.

    Right after a compaction (no real count yet) it is 0, so the noisy estimate of the
    compacted transcript cannot trigger another compaction; when the provider reported
    nothing (a dropped connection) the rough estimate keeps the session from growing
    unchecked.
    """
    if engine.last_prompt_tokens > 0:
        return engine.last_prompt_tokens
    if engine.state.awaiting_real_usage:
        return 0
    return request_rough_tokens(messages, tools=tools, system_prompt=system_prompt)


@dataclass(frozen=True, slots=True)
class PreflightResult:
    """The transcript to send and what preflight did to it."""

    messages: list[Message]
    rough_tokens: int
    """The rough request size of :attr:`messages`."""
    decision: CompressionDecision | None = None
    """The first pass's decision (its reason tells why nothing ran)."""
    compression: CompressionResult | None = None
    """All passes as one result, indexed against the input messages."""
    passes: int = 0


def _carried_counts(
    result: CompressionResult, before: Sequence[Message], counts: Sequence[int] | None
) -> list[int] | None:
    """Per-message counts for the compacted transcript: kept messages keep theirs."""
    if counts is None:
        return None
    return [
        counts[s] if s is not None and m is before[s] else rough_message_tokens(m)
        for m, s in zip(result.messages, result.sources, strict=True)
    ]


def preflight(
    engine: ContextEngine,
    messages: Sequence[Message],
    *,
    tools: ToolSchemas | None = None,
    system_prompt: str | None = None,
    token_counts: Sequence[int] | None = None,
) -> PreflightResult:
    """Compact before a model call when the rough request size crosses the threshold.

    Args:
        engine: the session's engine (its state changes when a pass compacts).
        messages: the transcript without the system prompt.
        tools: the tool schemas sent with the request.
        system_prompt: the system prompt sent with the request.
        token_counts: cached per-message counts aligned with ``messages``.
    """
    rough = request_rough_tokens(messages, tools=tools, system_prompt=system_prompt)
    current = list(messages)
    counts = list(token_counts) if token_counts is not None else None
    combined: CompressionResult | None = None
    first: CompressionDecision | None = None
    passes = 0
    while passes < MAX_PREFLIGHT_PASSES:
        decision = engine.should_compress(rough)
        first = first or decision
        if not decision:
            break
        passes += 1
        result = engine.compress(current, current_tokens=rough, token_counts=counts)
        combined = result if combined is None else combined.then(result)
        if not result.applied:
            break
        counts = _carried_counts(result, current, counts)
        current = result.messages
        previous, rough = (
            rough,
            request_rough_tokens(current, tools=tools, system_prompt=system_prompt),
        )
        if rough >= previous:
            break
    return PreflightResult(current, rough, first, combined, passes)
