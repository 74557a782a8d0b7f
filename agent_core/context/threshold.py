"""Where compaction starts: a share of the usable window, with a floor and a small-model guard."""

from __future__ import annotations

DEFAULT_THRESHOLD_RATIO = 0.50
MINIMUM_THRESHOLD_TOKENS = 64_000
"""Large windows are not compacted at half-full: the threshold never drops below this."""
SMALL_WINDOW_TRIGGER_RATIO = 0.85
"""For windows too small for the floor, compact at this share so the trigger is reachable."""


def compute_threshold_tokens(
    context_length: int,
    ratio: float = DEFAULT_THRESHOLD_RATIO,
    max_output_tokens: int | None = None,
) -> int:
    """The prompt size (tokens) at which compaction starts.

    The provider carves the output reservation out of the same window, so the usable input
    window is ``context_length - max_output_tokens``. The share of it is floored at
    64,000 tokens so big windows are not compacted early; when that floor reaches the usable
    window (a small local model), the trigger would never fire, so 85 % of it is used.

    Args:
        context_length: the model's window in tokens.
        ratio: the share of the usable window that triggers compaction.
        max_output_tokens: the output reservation, if any.

    Returns:
        The threshold in tokens, always below the usable window and at least 1.

    Raises:
        ValueError: ``context_length`` is not positive or ``ratio`` is not in (0, 1].
    """
    if context_length <= 0:
        raise ValueError(f"context_length must be positive, got {context_length}")
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    effective = context_length - (max_output_tokens or 0)
    if effective <= 0:
        effective = context_length
    floored = max(int(effective * ratio), MINIMUM_THRESHOLD_TOKENS)
    if floored >= effective:
        return max(1, min(int(effective * SMALL_WINDOW_TRIGGER_RATIO), effective - 1))
    return floored
