"""What the context engine hands back: decisions and compaction results, as plain data.

A compaction in the database is in place and never lossy: the caller archives exactly
the input messages the result names, rewrites the kept ones it names, and stores the
summary on the session. So a result says, by input index, what happened to every message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from agent_core.context.transcript import ChatMessage, Message


class CompressionOutcome(StrEnum):
    """How a compaction attempt ended."""

    COMPRESSED = "compressed"
    """Applied: the transcript is shorter and carries a new summary."""
    ABORTED = "aborted"
    """The summary call failed in a way that must not drop anything; nothing changed."""
    COOLDOWN = "cooldown"
    """A recent summary failure's cooldown is running; nothing was tried."""
    NOTHING_TO_COMPRESS = "nothing_to_compress"
    """Everything is in the protected head or tail."""
    TOO_SMALL = "too_small"
    """The compressible middle is smaller than a summary; not worth a model call."""
    NO_SAVINGS = "no_savings"
    """The summary would not have made the transcript shorter."""


class Strategy(StrEnum):
    """How the summary was produced."""

    NONE = "none"
    SUMMARY = "summary"
    """One request to the summary model."""
    CHUNKED_SUMMARY = "chunked_summary"
    """Chunk summaries merged into one (the middle did not fit one bounded request)."""
    FALLBACK = "fallback"
    """The deterministic digest: the summary model failed."""


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """The outcome of one compaction, indexed against the messages it was given."""

    outcome: CompressionOutcome
    messages: list[Message]
    """The new transcript; unchanged messages are the caller's own objects."""
    sources: tuple[int | None, ...]
    """For each message of :attr:`messages`, the input index it came from; ``None`` for the
    summary message and for stubbed tool results."""
    detail: str = ""
    """Why it ended as it did, for logs and the user (e.g. the provider's error)."""
    strategy: Strategy = Strategy.NONE
    summary: str | None = None
    """The new summary body without markers (what :class:`EngineState` keeps)."""
    summary_version: int = 0
    summary_index: int | None = None
    """Where the summary message sits in :attr:`messages`."""
    archived_indices: tuple[int, ...] = ()
    """Input messages no longer in the transcript: archive them. This includes a previous
    summary message the caller inserted, which has nothing to archive."""
    rewritten: Mapping[int, ChatMessage] = field(default_factory=dict)
    """Input index -> new content, for kept messages that pruning or repair changed."""
    tokens_before: int = 0
    tokens_after: int = 0
    fallback_used: bool = False
    summary_model: str | None = None
    """The model that wrote the summary (after any fallback)."""
    model_fallback_used: bool = False
    """The summary model failed and the main model wrote the summary."""
    identifiers_carried: tuple[str, ...] = ()
    """Identifiers written into the summary's ledger, most recent first."""
    identifiers_dropped: tuple[str, ...] = ()
    """Identifiers of compacted turns that did not fit the ledger; only in the archive."""
    summary_calls: int = 0
    max_summary_request_tokens: int = 0
    """The largest summary request, in cautious planning tokens."""
    cooldown_until: datetime | None = None
    """Set when this attempt started a failure cooldown."""

    @property
    def summary_text(self) -> str | None:
        """The summary message's text, markers included, as the model sees it."""
        if self.summary_index is None:
            return None
        return str(self.messages[self.summary_index]["content"])

    @property
    def applied(self) -> bool:
        """Whether the transcript changed."""
        return self.outcome is CompressionOutcome.COMPRESSED

    @property
    def aborted(self) -> bool:
        """Whether a summary failure stopped the compaction with nothing dropped."""
        return self.outcome is CompressionOutcome.ABORTED

    def then(self, later: CompressionResult) -> CompressionResult:
        """One result for this compaction followed by ``later`` (run on :attr:`messages`).

        Indices are translated back to this result's input, so the caller applies the
        pair as a single compaction.
        """
        calls = self.summary_calls + later.summary_calls
        largest = max(self.max_summary_request_tokens, later.max_summary_request_tokens)
        if not later.applied:
            return replace(
                self,
                summary_calls=calls,
                max_summary_request_tokens=largest,
                cooldown_until=later.cooldown_until or self.cooldown_until,
            )
        if not self.applied:
            return replace(later, summary_calls=calls, max_summary_request_tokens=largest)
        sources = tuple(None if s is None else self.sources[s] for s in later.sources)
        kept = {s for s in sources if s is not None}
        archived = set(self.archived_indices)
        archived.update(s for j in later.archived_indices if (s := self.sources[j]) is not None)
        rewritten = {s: m for s, m in self.rewritten.items() if s in kept}
        for j, message in later.rewritten.items():
            original = self.sources[j]
            if original is not None:
                rewritten[original] = message
        return replace(
            later,
            sources=sources,
            archived_indices=tuple(sorted(archived)),
            rewritten=rewritten,
            tokens_before=self.tokens_before,
            fallback_used=self.fallback_used or later.fallback_used,
            model_fallback_used=self.model_fallback_used or later.model_fallback_used,
            identifiers_dropped=tuple(
                dict.fromkeys(
                    v
                    for v in (*later.identifiers_dropped, *self.identifiers_dropped)
                    if v not in later.identifiers_carried
                )
            ),
            summary_calls=calls,
            max_summary_request_tokens=largest,
        )


class DecisionReason(StrEnum):
    """Why the engine does or does not want to compact."""

    OVER_THRESHOLD = "over_threshold"
    BELOW_THRESHOLD = "below_threshold"
    DISABLED = "disabled"
    INEFFECTIVE = "ineffective"
    """The last compactions saved too little: tell the user about ``/compress <topic>`` or
    ``/new``."""
    COOLDOWN = "cooldown"
    AWAITING_REAL_USAGE = "awaiting_real_usage"
    """A compaction just ran; wait for the provider's real prompt size."""
    DEFERRED = "deferred"
    """A preflight estimate is not trusted: a compaction just ran, or the provider showed
    the prompt fits and it has barely grown since."""


@dataclass(frozen=True, slots=True)
class CompressionDecision:
    """Whether to compact now, and why; truthy when the answer is yes."""

    compress: bool
    reason: DecisionReason
    tokens: int
    """The prompt size the decision was made on."""
    threshold_tokens: int

    def __bool__(self) -> bool:
        return self.compress
