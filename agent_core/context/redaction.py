"""Remove credentials from text before it reaches a summary model or a stored summary.

Summaries are persisted and re-sent on every turn, so a key pasted into a chat once would
otherwise live forever. Text is redacted before the summary call and the summary is
redacted again afterwards (a model may reassemble a secret from fragments).
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_SECRET = re.compile(
    "|".join(
        (
            # name = value: keep the name so the summary still says a key was set.
            r"(?P<kv>(?i:\b(?:[a-z0-9]+[_-])*(?:api[_-]?key|access[_-]?key|secret[_-]?key|client[_-]?secret|"
            r"auth[_-]?token|access[_-]?token|refresh[_-]?token|bot[_-]?token|token|secret|"
            r"password|passwd|pwd)\b)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;)}\]]{4,}",
            r"(?P<bearer>(?i:\bbearer\s+))[A-Za-z0-9._~+/=-]{8,}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^\x00]*?-----END [A-Z ]*PRIVATE KEY-----",
            r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",
            r"\bgithub_pat_[A-Za-z0-9_]{30,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\bxapp-[A-Za-z0-9-]{10,}",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\bAIza[0-9A-Za-z_-]{35}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"\b\d{8,10}:AA[A-Za-z0-9_-]{30,}",  # Telegram bot token
            r"(?<=://)[^/\s:@]{1,64}:[^/\s@]{1,128}(?=@)",  # user:password@ in URLs
        )
    )
)


_TRIGGERS = (
    "key", "token", "secret", "pass", "pwd", "bearer", "sk-", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "github_pat_", "xox", "xapp-", "akia", "aiza", "eyj", ":aa", "://",
)  # fmt: skip
"""Lower-case substrings every secret pattern needs; text without any skips the regex."""
_TRIGGER = re.compile("|".join(map(re.escape, _TRIGGERS)))


def _replacement(match: re.Match[str]) -> str:
    prefix = match.group("kv") or match.group("bearer") or ""
    return prefix + REDACTED


def redact(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by ``[REDACTED]``."""
    if _TRIGGER.search(text.lower()) is None:
        return text
    return _SECRET.sub(_replacement, text)
