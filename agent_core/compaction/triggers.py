"""When a session is compacted: one rule per trigger, judged on one measurement of its size.

Seven things start a compaction. Inside a turn: the pre-agent **hygiene** pass (85 % of the
window or the hard message limit), **preflight** before each model call (the compressor
threshold, on an estimate that includes tool schemas), the **post-response** check on the
provider's real prompt size, and **overflow** recovery when the provider refused the prompt.
Between turns: **background** compaction of a busy group crossing its line, and **idle**
compaction of a quiet session that grew. And **manual** ``/compress``. Every rule is here,
in :func:`due`; callers measure the session once (:class:`SessionSize`) and ask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from agent_core.config import CompressionSettings
from agent_core.context import (
    CompressionDecision,
    ContextEngine,
    DecisionReason,
    compute_threshold_tokens,
)
from agent_core.context.identifiers import ledger_max_tokens


class Trigger(StrEnum):
    """Why a compaction runs."""

    HYGIENE = "hygiene"
    PREFLIGHT = "preflight"
    POST_RESPONSE = "post_response"
    OVERFLOW = "overflow"
    MANUAL = "manual"
    BACKGROUND = "background"
    IDLE = "idle"


BACKGROUND_LINE_SHARE = 0.9
"""Background compaction starts at this share of the compressor threshold, a little before
it: a group thread kept under the line never makes a reply wait for a compaction."""
IDLE_LINE_SHARE = 0.4
"""A quiet session over this share of the threshold, plus what the identifier ledger may
take, is compacted down: a session compacts to about the tail budget (20 % of the
threshold) plus its summary and ledger, so this catches one that grew well past that
since, without compacting sessions that barely changed (a compaction that finds too
little to do counts against the anti-thrashing stop)."""
RING_EVERY_MESSAGES = 50
"""While a session stays over its background line, every this many messages ring again
(a ring that found the compaction lease busy is not lost)."""


def background_line(threshold_tokens: int) -> int:
    """Where background compaction of a busy thread starts."""
    return int(threshold_tokens * BACKGROUND_LINE_SHARE)


def idle_line(threshold_tokens: int, ledger_tokens: int = 0) -> int:
    """How large a quiet session must be to be compacted down.

    Args:
        threshold_tokens: the compressor threshold.
        ledger_tokens: the most a summary's identifier ledger may take.
    """
    return int(threshold_tokens * IDLE_LINE_SHARE) + ledger_tokens


@dataclass(frozen=True, slots=True)
class SessionSize:
    """The one measurement every rule judges: the next request as the provider counts it.

    ``counted_tokens`` is our count of the request (exact per-message counts plus the
    system prompt and tool schemas, or a rough one from the session row between turns);
    ``calibration`` is the provider's tokens per counted token, learnt from its responses.
    """

    counted_tokens: int
    messages: int
    calibration: float = 1.0

    @property
    def tokens(self) -> int:
        """The request's size in the provider's tokens."""
        return round(self.counted_tokens * self.calibration)


@dataclass(frozen=True, slots=True)
class Lines:
    """A model's compaction lines, in tokens, with the hard message limit."""

    threshold: int
    hygiene: int
    message_limit: int
    ledger: int = 0
    """The most a summary's identifier ledger may add to a compacted session."""

    @classmethod
    def compute(
        cls, settings: CompressionSettings, context_length: int, max_output_tokens: int | None
    ) -> Lines:
        """The lines of a model's window under ``settings``."""
        return cls(
            threshold=compute_threshold_tokens(
                context_length, settings.threshold, max_output_tokens
            ),
            hygiene=compute_threshold_tokens(
                context_length, settings.hygiene_threshold, max_output_tokens
            ),
            message_limit=settings.hard_message_limit,
            ledger=ledger_max_tokens(context_length),
        )

    @classmethod
    def of(cls, engine: ContextEngine) -> Lines:
        """The lines of ``engine``'s model and settings."""
        return cls.compute(engine.settings, engine.context_length, engine.max_output_tokens)

    @property
    def background(self) -> int:
        """Where a busy group starts compacting between turns."""
        return background_line(self.threshold)

    @property
    def idle(self) -> int:
        """How large a quiet session must be to be compacted down."""
        return idle_line(self.threshold, self.ledger)


def due(
    trigger: Trigger,
    size: SessionSize,
    engine: ContextEngine,
    *,
    rough_transcript: Callable[[], int] | None = None,
) -> CompressionDecision:
    """Whether ``trigger`` should compact a session of ``size`` now.

    - hygiene: over the hygiene line or the message limit. It is the safety net behind
      the anti-thrashing stop, so only "disabled" and a summary failure's cooldown hold it.
    - preflight: the engine's own rule at its threshold (anti-thrashing and cooldown
      included), deferred to the provider's real count right after a compaction or while
      the provider has shown the prompt fits (``rough_transcript`` gives the transcript's
      rough size, computed only when the rule says yes: it walks the whole transcript).
    - post-response: the engine's own rule at its threshold.
    - background and idle: over their line (or the message limit), then the engine's rule
      judged as if at its threshold.
    - overflow and manual: always, unless compaction is disabled (overflow) — the provider
      or the user has already decided.
    """
    lines = Lines.of(engine)
    tokens = size.tokens

    def decision(compress: bool, reason: DecisionReason, line: int) -> CompressionDecision:
        return CompressionDecision(compress, reason, tokens, line)

    enabled = engine.settings.enabled
    if trigger is Trigger.MANUAL:
        return decision(True, DecisionReason.OVER_THRESHOLD, lines.threshold)
    if not enabled:
        return decision(False, DecisionReason.DISABLED, lines.threshold)
    if trigger is Trigger.OVERFLOW:
        return decision(True, DecisionReason.OVER_THRESHOLD, lines.threshold)
    over_limit = size.messages >= lines.message_limit
    if trigger is Trigger.HYGIENE:
        if not over_limit and tokens < lines.hygiene:
            return decision(False, DecisionReason.BELOW_THRESHOLD, lines.hygiene)
        if engine.state.in_cooldown(engine.now()):
            return decision(False, DecisionReason.COOLDOWN, lines.hygiene)
        return decision(True, DecisionReason.OVER_THRESHOLD, lines.hygiene)
    if trigger is Trigger.PREFLIGHT:
        judged = engine.should_compress(tokens)
        deferred = (
            judged
            and rough_transcript is not None
            and engine.should_defer_preflight(rough_transcript())
        )
        if deferred:
            return decision(False, DecisionReason.DEFERRED, lines.threshold)
        return judged
    if trigger is Trigger.POST_RESPONSE:
        return engine.should_compress(tokens)
    line = lines.idle if trigger is Trigger.IDLE else lines.background
    if over_limit:
        return decision(True, DecisionReason.OVER_THRESHOLD, line)
    if tokens < line:
        return decision(False, DecisionReason.BELOW_THRESHOLD, line)
    judged = engine.should_compress(max(tokens, lines.threshold))
    return decision(judged.compress, judged.reason, line)


@dataclass(frozen=True, slots=True)
class BackgroundRing:
    """Whether a recorded group message should ring for a background compaction.

    A busy group piles up messages overnight with no turn to compact it; if nothing ran
    between turns, the morning's first question would wait for one huge compaction. So a
    message that brings the session over its background line (or the message limit) rings,
    and it rings again every :data:`RING_EVERY_MESSAGES` messages while the session stays
    over. Judged on the stored running total, which intake has at hand for free; the
    compaction itself then judges the exact size with :func:`due`.
    """

    token_line: int
    message_line: int
    every_messages: int = RING_EVERY_MESSAGES

    @classmethod
    def of(cls, lines: Lines) -> BackgroundRing:
        """The ring rule for a model's lines."""
        return cls(token_line=lines.background, message_line=lines.message_limit)

    def should_ring(self, tokens: int, previous_tokens: int, count: int) -> bool:
        """Whether a message that grew the transcript should start a background compaction.

        Args:
            tokens: the active transcript's size after the message.
            previous_tokens: its size before.
            count: its number of messages after.
        """
        if previous_tokens < self.token_line <= tokens or count == self.message_line:
            return True
        over = tokens >= self.token_line or count >= self.message_line
        return over and count % self.every_messages == 0
