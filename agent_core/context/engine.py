"""The pluggable context engine: its lifecycle and the state-keeping every engine shares.

Lifecycle, per session: ``on_session_start`` (with the stored state), then per model call
``update_from_response`` (the provider's real usage) and ``should_compress``; ``compress``
when it says so; ``on_session_end`` at a real session boundary (``/new``), not per turn.
The engine keeps its knowledge in an :class:`EngineState` the caller persists, because
every turn builds a fresh engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import ClassVar

from agent_core.config import CompressionSettings
from agent_core.context.result import CompressionDecision, CompressionResult, DecisionReason
from agent_core.context.state import EngineState
from agent_core.context.threshold import compute_threshold_tokens
from agent_core.context.transcript import Message
from agent_core.llm.model import Usage

MIN_EFFECTIVE_SAVINGS = 0.10
"""A compaction that shrinks the real prompt by less than this is ineffective."""
MAX_INEFFECTIVE_COMPACTIONS = 2
"""After this many ineffective compactions in a row, automatic compaction stops."""
PREFLIGHT_GROWTH_TOLERANCE_TOKENS = 4_096
PREFLIGHT_GROWTH_TOLERANCE_RATIO = 0.05
"""Growth (share of the threshold) the rough estimate may show before a proven fit is doubted."""

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, timezone-aware."""
    return datetime.now(UTC)


class ContextEngine(ABC):
    """Decides when to shrink a session's transcript, and shrinks it.

    Args:
        settings: the compression settings.
        context_length: the main model's window.
        max_output_tokens: the main model's output reservation, if known.
        state: the session's stored state; a new session starts from the default.
        clock: the time source (tests pass a fixed one).
    """

    name: ClassVar[str]
    """The name configuration selects the engine by."""

    def __init__(
        self,
        settings: CompressionSettings,
        *,
        context_length: int,
        max_output_tokens: int | None = None,
        state: EngineState | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self.context_length = context_length
        self.max_output_tokens = max_output_tokens
        self.threshold_tokens = compute_threshold_tokens(
            context_length, settings.threshold, max_output_tokens
        )
        self._state = state or EngineState()
        self._clock = clock

    @property
    def state(self) -> EngineState:
        """The session state to persist after every call that may change it."""
        return self._state

    def now(self) -> datetime:
        """The engine's clock (cooldowns are judged by it)."""
        return self._clock()

    @property
    def last_prompt_tokens(self) -> int:
        """The provider's last reported prompt size; 0 when unknown."""
        return self._state.last_prompt_tokens

    @property
    def compression_count(self) -> int:
        """Compactions applied in this session."""
        return self._state.compression_count

    def on_session_start(self, state: EngineState | None = None) -> None:
        """Load the session's stored state (``None`` for a new session)."""
        self._state = state or EngineState()

    def on_session_end(self) -> None:
        """Forget the session, so nothing of it (its summary) leaks into the next."""
        self._state = EngineState()

    def update_from_response(self, usage: Usage | None) -> None:
        """Record the provider's real prompt size and judge the last compaction by it.

        Only prompt tokens count: completion and reasoning tokens are not context. A
        response without usage (some providers, a dropped connection) clears the wait for
        real usage so the rough estimate takes over instead of blocking compaction.
        """
        state = self._state
        if usage is None or usage.prompt_tokens <= 0:
            self._state = replace(state, last_prompt_tokens=0, awaiting_real_usage=False)
            return
        tokens = usage.prompt_tokens
        if not state.awaiting_real_usage:
            self._state = replace(
                state,
                last_prompt_tokens=tokens,
                fit_proven=state.fit_proven and tokens < self.threshold_tokens,
            )
            return
        before = state.tokens_before_compaction
        saved = 1 - tokens / before if before > 0 else 1.0
        self._state = replace(
            state,
            last_prompt_tokens=tokens,
            awaiting_real_usage=False,
            fit_proven=tokens < self.threshold_tokens,
            ineffective_count=(state.ineffective_count + 1 if saved < MIN_EFFECTIVE_SAVINGS else 0),
        )

    def should_compress(self, prompt_tokens: int | None = None) -> CompressionDecision:
        """Whether to compact now.

        Args:
            prompt_tokens: the prompt size to judge (a preflight estimate); ``None`` uses
                the provider's last reported size.
        """
        state = self._state
        tokens = state.last_prompt_tokens if prompt_tokens is None else prompt_tokens

        def decision(compress: bool, reason: DecisionReason) -> CompressionDecision:
            return CompressionDecision(compress, reason, tokens, self.threshold_tokens)

        if not self.settings.enabled:
            return decision(False, DecisionReason.DISABLED)
        if prompt_tokens is None and state.awaiting_real_usage:
            return decision(False, DecisionReason.AWAITING_REAL_USAGE)
        if tokens < self.threshold_tokens:
            return decision(False, DecisionReason.BELOW_THRESHOLD)
        if state.ineffective_count >= MAX_INEFFECTIVE_COMPACTIONS:
            return decision(False, DecisionReason.INEFFECTIVE)
        if state.in_cooldown(self._clock()):
            return decision(False, DecisionReason.COOLDOWN)
        return decision(True, DecisionReason.OVER_THRESHOLD)

    def should_defer_preflight(self, rough_message_tokens: int) -> bool:
        """Whether a rough preflight estimate should wait for the provider's real count.

        Rough estimates of schema-heavy requests run high. Right after a compaction the
        real count is not known yet; once the provider has shown the compacted prompt fits,
        a rough estimate that has grown only a little since is noise, not pressure.

        Args:
            rough_message_tokens: the rough size of the transcript (without tool schemas).
        """
        state = self._state
        if state.awaiting_real_usage:
            return True
        if not state.fit_proven:
            return False
        tolerance = max(
            PREFLIGHT_GROWTH_TOLERANCE_TOKENS,
            int(self.threshold_tokens * PREFLIGHT_GROWTH_TOLERANCE_RATIO),
        )
        return rough_message_tokens - state.post_compaction_rough <= tolerance

    @abstractmethod
    def compress(
        self,
        messages: Sequence[Message],
        *,
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        token_counts: Sequence[int] | None = None,
    ) -> CompressionResult:
        """Shrink ``messages``; the result says by input index what happened to each.

        Args:
            messages: the transcript as the model sees it (an earlier summary message
                included), the system prompt optional.
            current_tokens: the prompt size that triggered this (real or estimated).
            focus_topic: what the summary should keep in most detail (``/compress <topic>``).
            force: a manual request: ignore the failure cooldown and the size pre-check.
            token_counts: cached per-message token counts aligned with ``messages``.
        """

    @abstractmethod
    def has_content_to_compress(
        self, messages: Sequence[Message], *, token_counts: Sequence[int] | None = None
    ) -> bool:
        """Whether anything lies outside the protected head and tail (a ``/compress`` check).

        Args:
            messages: the transcript, as for :meth:`compress`.
            token_counts: cached per-message token counts aligned with ``messages``.
        """
