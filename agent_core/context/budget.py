"""How large a summary may be: a share of what it replaces, within fixed bounds."""

from __future__ import annotations

SUMMARY_RATIO = 0.20
"""A summary gets this share of the tokens it replaces."""
MIN_SUMMARY_TOKENS = 2_000
MAX_SUMMARY_TOKENS = 12_000
MAX_SUMMARY_WINDOW_SHARE = 0.05
"""A summary never takes more than this share of the main model's window."""


def summary_budget_tokens(compressed_tokens: int, context_length: int) -> int:
    """The summary budget: 20 % of the compressed content in ``[2,000, min(5 %, 12,000)]``.

    When 5 % of a small window is below 2,000 tokens, the floor wins: a summary shorter
    than that cannot hold the template.

    Args:
        compressed_tokens: the size of the turns being summarised.
        context_length: the main model's window.
    """
    ceiling = min(int(context_length * MAX_SUMMARY_WINDOW_SHARE), MAX_SUMMARY_TOKENS)
    return max(MIN_SUMMARY_TOKENS, min(int(compressed_tokens * SUMMARY_RATIO), ceiling))
