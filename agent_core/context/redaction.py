"""Remove credentials from text before it reaches a summary model or a stored summary.

Summaries are persisted and re-sent on every turn, so a key pasted into a chat once would
otherwise live forever. Text is redacted before the summary call and the summary is
redacted again afterwards (a model may reassemble a secret from fragments). What counts as
a secret is :mod:`agent_core.context.secret_rules` (gitleaks' rules plus chat phrasings),
matched in linear time.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_core.context.secret_rules import Finding, find_secrets

REDACTED = "[REDACTED]"


def redact(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by ``[REDACTED]``.

    Only the secret itself is replaced (``password = [REDACTED]``), so the summary still
    says that a key was set; overlapping findings are replaced as one.
    """
    return redact_all([text])[0]


def redact_all(texts: Sequence[str]) -> list[str]:
    """:func:`redact` of each text; a batch of messages is searched for keywords at once."""
    return [
        _replace(text, findings) if findings else text
        for text, findings in zip(texts, find_secrets(texts), strict=True)
    ]


def _replace(text: str, findings: Sequence[Finding]) -> str:
    parts: list[str] = []
    position = 0
    end = -1
    for start, stop in sorted((f.start, f.end) for f in findings):
        if start < end:  # overlaps the previous finding: extend it
            end = max(end, stop)
            continue
        if end >= 0:
            parts.append(REDACTED)
            position = end
        parts.append(text[position:start])
        end = stop
    parts.append(REDACTED)
    parts.append(text[end:])
    return "".join(parts)


def has_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return bool(find_secrets([text])[0])
