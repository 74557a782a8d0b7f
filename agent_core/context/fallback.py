"""A deterministic summary for when the summary model fails: never drop the middle silently.

It keeps the previous summary, then quotes the start of as many of the most recent
compacted turns as fit the budget, oldest first, and says that the rest is archived.
The identifier ledger is appended by the caller as for any summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_core.tokens import rough_tokens

DIGEST_LINE_CHARS = 200
"""How much of each compacted turn the digest quotes."""
PREVIOUS_SUMMARY_SHARE = 0.5
"""At most this share of the budget goes to the previous summary."""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def fallback_summary(
    turns: Sequence[str], *, previous: str | None, budget_tokens: int, reason: str
) -> str:
    """A structured summary built without a model.

    Args:
        turns: the serialised (labelled, redacted) compacted turns, oldest first.
        previous: the previous summary body, without its identifier ledger.
        budget_tokens: the size the summary must stay within.
        reason: why the model summary is missing, shown to the model.
    """
    note = (
        f"No model summary is available ({_one_line(reason, DIGEST_LINE_CHARS)}). This is an "
        f"automatic digest of {len(turns):,} compacted turns; the full turns are archived."
    )
    sections = [f"## Historical Task Snapshot\n{note}"]
    remaining = budget_tokens - rough_tokens(sections[0])
    if previous:
        allowed_chars = int(budget_tokens * PREVIOUS_SUMMARY_SHARE) * 4
        kept = previous if len(previous) <= allowed_chars else previous[:allowed_chars] + "…"
        sections.append(f"## Previous Summary\n{kept}")
        remaining -= rough_tokens(sections[-1])
    lines: list[str] = []
    for turn in reversed(turns):
        line = f"- {_one_line(turn, DIGEST_LINE_CHARS)}"
        cost = rough_tokens(line) + 1
        if cost > remaining:
            break
        lines.append(line)
        remaining -= cost
    omitted = len(turns) - len(lines)
    digest = "\n".join(reversed(lines))
    if omitted:
        digest = f"({omitted:,} earlier turns omitted here; see the archive)\n{digest}"
    sections.append(f"## Earlier Turns (digest, oldest first)\n{digest}")
    return "\n\n".join(sections)
