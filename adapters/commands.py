"""Recognise chat commands in plain text (``/compress auth bug``)."""

from __future__ import annotations

import re

_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.DOTALL)


def parse_command(text: str, *, bot_username: str | None = None) -> tuple[str, str] | None:
    """``(name, args)`` when ``text`` is a command, else ``None``.

    ``/cmd@otherbot`` (Telegram's form in groups) is not ours when ``bot_username`` is
    known and differs.
    """
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name, target, args = match.group(1), match.group(2), match.group(3) or ""
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args.strip()
