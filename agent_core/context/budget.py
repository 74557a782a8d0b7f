"""How large a summary may be: a share of what it replaces, within fixed bounds."""

from __future__ import annotations

SUMMARY_RATIO = 0.20
"""A summary gets this share of the tokens it replaces."""
MIN_SUMMARY_TOKENS = 2_000
MAX_SUMMARY_TOKENS = 12_000
MAX_SUMMARY_WINDOW_SHARE = 0.05
"""A summary never takes more than this share of the main model's window."""


def summary_budget_tokens(
    compressed_tokens: int, context_length: int, *, carried_tokens: int = 0
) -> int:
    """The summary budget: 20 % of the compressed content in ``[2,000, min(5 %, 12,000)]``.

    When 5 % of a small window is below 2,000 tokens, the floor wins: a summary shorter
    than that cannot hold the template. An update keeps at least ``carried_tokens`` (up to
    the ceiling): a quiet-time compaction of a few hundred turns must not squeeze out what
    the summary it replaces carried.

    Args:
        compressed_tokens: the size of the turns being summarised.
        context_length: the main model's window.
        carried_tokens: the budget the previous summary's carried content needs.
    """
    ceiling = summary_ceiling_tokens(context_length)
    scaled = max(MIN_SUMMARY_TOKENS, min(int(compressed_tokens * SUMMARY_RATIO), ceiling))
    return max(scaled, min(carried_tokens, ceiling))


def summary_ceiling_tokens(context_length: int) -> int:
    """The most a summary budget may be: ``min(5 % of the window, 12,000)`` tokens."""
    return min(int(context_length * MAX_SUMMARY_WINDOW_SHARE), MAX_SUMMARY_TOKENS)
