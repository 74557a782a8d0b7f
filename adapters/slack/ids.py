"""Message ids that are unique per bot: Slack's ``ts`` is only unique within a channel.

Hubbub stores ``"{channel}:{ts}"`` as a message's platform id (and as the id a reply refers
to) and parses it back when delivering. Slash commands have no ``ts``; they are stored as
``"{channel}:cmd:{trigger_id}"``, which parses to a channel without a message to thread on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TS = re.compile(r"^\d{1,12}\.\d{1,9}$")
COMMAND_MARKER = "cmd"
"""The middle part of a slash command's id, which has no ``ts``."""


def is_ts(value: str | None) -> bool:
    """Whether ``value`` looks like a Slack message timestamp (``1700000000.000100``)."""
    return value is not None and _TS.match(value) is not None


def message_key(channel: str, ts: str) -> str:
    """The per-bot unique id of the message ``ts`` in ``channel``."""
    return f"{channel}:{ts}"


def command_key(channel: str, trigger_id: str) -> str:
    """The per-bot unique id of one slash command invocation."""
    return f"{channel}:{COMMAND_MARKER}:{trigger_id}"


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A parsed message id: the channel and, when it names a message, its ``ts``."""

    channel: str
    ts: str | None


def parse_key(key: str | None) -> MessageRef | None:
    """Split an id made by :func:`message_key` or :func:`command_key`.

    Returns ``None`` for ``None`` or an id without a channel part; ``ts`` is ``None`` when
    the id does not name a message (a slash command).
    """
    if not key:
        return None
    channel, sep, rest = key.partition(":")
    if not sep or not channel:
        return None
    return MessageRef(channel, rest if is_ts(rest) else None)
