"""Remove credentials from text before it reaches a summary model or a stored summary.

Summaries are persisted and re-sent on every turn, so a key pasted into a chat once would
otherwise live forever. Text is redacted before the summary call and the summary is
redacted again afterwards (a model may reassemble a secret from fragments).
"""

from __future__ import annotations

import re
from functools import cache

REDACTED = "[REDACTED]"

_SECRETS: tuple[tuple[tuple[str, ...], str], ...] = (
    # name = value: keep the name so the summary still says a key was set. Quotes may
    # arrive escaped (JSON inside a JSON tool argument), so backslashes before them are
    # part of the name's side and never of the value.
    (
        ("key", "token", "secret", "pass", "pwd"),
        r"(?P<kv>(?i:\b(?:[a-z0-9]+[_-])*(?:api[_-]?key|access[_-]?key|secret[_-]?key|client[_-]?secret|"
        r"auth[_-]?token|access[_-]?token|refresh[_-]?token|bot[_-]?token|token|secret|"
        r"password|passwd|pwd)\b)(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?)[^\s\\\"',;)}\]]{4,}",
    ),
    (("bearer",), r"(?P<bearer>(?i:\bbearer\s+))[A-Za-z0-9._~+/=-]{8,}"),
    (
        ("private key",),
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^\x00]*?-----END [A-Z ]*PRIVATE KEY-----",
    ),
    (("sk-",), r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (("xapp-",), r"\bxapp-[A-Za-z0-9-]{10,}"),
    (("akia",), r"\bAKIA[0-9A-Z]{16}\b"),
    (("aiza",), r"\bAIza[0-9A-Za-z_-]{35}"),
    (("eyj",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ((":aa",), r"\b\d{8,10}:AA[A-Za-z0-9_-]{30,}"),  # Telegram bot token
    (("://",), r"(?<=://)[^/\s:@]{1,64}:[^/\s@]{1,128}(?=@)"),  # user:password@ in URLs
)
"""Each secret pattern with the lower-case substrings it needs: a pattern whose substrings
are all absent from a text cannot match it, so it is left out of the search."""
_TRIGGER = re.compile("|".join(re.escape(t) for triggers, _ in _SECRETS for t in triggers))
"""Any substring any pattern needs: most chat text has none and skips the search."""


@cache
def _secret_pattern(present: tuple[bool, ...]) -> re.Pattern[str]:
    """The secret patterns whose substrings are present, in their order."""
    return re.compile("|".join(p for (_, p), on in zip(_SECRETS, present, strict=True) if on))


def _replacement(match: re.Match[str]) -> str:
    groups = match.groupdict()
    prefix = groups.get("kv") or groups.get("bearer") or ""
    return prefix + REDACTED


def redact(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by ``[REDACTED]``."""
    lowered = text.lower()
    if _TRIGGER.search(lowered) is None:
        return text
    present = tuple(any(t in lowered for t in triggers) for triggers, _ in _SECRETS)
    return _secret_pattern(present).sub(_replacement, text)


def has_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text) != text
