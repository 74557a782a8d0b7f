"""Slack message text to the plain text the model reads: mentions by name, links readable.

Slack sends ``<@U123>`` for a mention, ``<#C123|general>`` for a channel, ``<url|label>``
for a link and escapes ``&``, ``<``, ``>``. The transcript stores what a person would see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TOKEN = re.compile(r"<([^<>\n]+)>")
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_SPECIAL = {"here": "@here", "channel": "@channel", "everyone": "@everyone"}


def mentioned_users(text: str) -> list[str]:
    """The user ids mentioned in ``text``, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in _USER_MENTION.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def mentions(text: str, user_id: str) -> bool:
    """Whether ``text`` mentions ``user_id``."""
    return user_id in mentioned_users(text)


def strip_leading_mention(text: str, user_id: str) -> str:
    """``text`` without a mention of ``user_id`` at its start (``<@UBOT> hi`` → ``hi``).

    The mention stays when nothing else is said, so the message is not empty.
    """
    match = _USER_MENTION.match(text.lstrip())
    if match is None or match.group(1) != user_id:
        return text
    rest = text.lstrip()[match.end() :].lstrip(" ,:\u00a0").lstrip()
    return rest or text


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _render(token: str, names: Mapping[str, str]) -> str:
    target, _, label = token.partition("|")
    if target.startswith("@"):
        user = target[1:]
        return "@" + (names.get(user) or label or user)
    if target.startswith("#"):
        return "#" + (label or target[1:])
    if target.startswith("!"):
        command = target[1:]
        if command in _SPECIAL:
            return _SPECIAL[command]
        if command.startswith("subteam^"):
            return label or "@" + command.removeprefix("subteam^")
        return label or command
    if target.startswith("mailto:"):
        return label or target.removeprefix("mailto:")
    if label and label != target:
        return f"{label} ({target})"
    return target


def to_plain(text: str, names: Mapping[str, str] | None = None) -> str:
    """Replace Slack's control sequences with what they show; unescape ``&<>``.

    Args:
        text: the message text as Slack sends it.
        names: display names by user id, for mentions.
    """
    names = names or {}
    out: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        out.append(_unescape(text[pos : match.start()]))
        out.append(_unescape(_render(match.group(1), names)))
        pos = match.end()
    out.append(_unescape(text[pos:]))
    return "".join(out)
