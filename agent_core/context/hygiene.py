"""Session hygiene: the pre-agent safety net for transcripts that grew between turns.

A busy group piles up thousands of messages overnight without a single turn, so the
in-loop compressor never ran. Before the agent starts, a transcript over 85 % of the
window (deliberately above the compressor's 50 %, or every long session would compact on
every turn) or over the hard message limit is compacted with the same compressor. The
message limit holds even when no token count is known, which breaks the spiral of "no
usage reported, so no compaction, so more failures".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from agent_core.context.engine import ContextEngine
from agent_core.context.result import CompressionResult
from agent_core.context.threshold import compute_threshold_tokens
from agent_core.context.transcript import Message, message_tokens


class HygieneTrigger(StrEnum):
    """What made hygiene compact."""

    TOKENS = "tokens"
    MESSAGE_LIMIT = "message_limit"


@dataclass(frozen=True, slots=True)
class HygieneResult:
    """What the hygiene pass found and did."""

    tokens: int
    """The transcript size it judged."""
    threshold_tokens: int
    message_count: int
    trigger: HygieneTrigger | None = None
    """``None`` when the transcript was fine."""
    compression: CompressionResult | None = None


def hygiene_threshold_tokens(engine: ContextEngine) -> int:
    """The hygiene line: the hygiene share of the engine's usable window."""
    return compute_threshold_tokens(
        engine.context_length, engine.settings.hygiene_threshold, engine.max_output_tokens
    )


def session_hygiene(
    messages: Sequence[Message],
    engine: ContextEngine,
    *,
    token_counts: Sequence[int] | None = None,
    known_tokens: int | None = None,
) -> HygieneResult:
    """Compact a transcript that is over the hygiene line or the message limit.

    It ignores the anti-thrashing stop (it is the safety net behind it) but honours the
    failure cooldown; it does nothing when compression is disabled.

    Args:
        messages: the stored transcript as the model would see it.
        engine: the session's engine, holding its state.
        token_counts: cached per-message counts aligned with ``messages``.
        known_tokens: another measure of the size (the provider's last prompt size or the
            session's running total); the larger of it and the message sum is judged.
    """
    settings = engine.settings
    tokens = max(sum(message_tokens(messages, token_counts)), known_tokens or 0)
    threshold = hygiene_threshold_tokens(engine)
    found = HygieneResult(tokens, threshold, len(messages))
    if not settings.enabled:
        return found
    if len(messages) >= settings.hard_message_limit:
        trigger = HygieneTrigger.MESSAGE_LIMIT
    elif tokens >= threshold:
        trigger = HygieneTrigger.TOKENS
    else:
        return found
    result = engine.compress(messages, current_tokens=tokens, token_counts=token_counts)
    return HygieneResult(tokens, threshold, len(messages), trigger, result)
