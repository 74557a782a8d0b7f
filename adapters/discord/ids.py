"""How Discord ids are written in Hubbub's platform-neutral messages.

Discord snowflakes are unique across the platform, so a message id is stored as it is. A
slash command has no message of its own: it is stored under its interaction id, prefixed
so that it can never be taken for a message to reply to.
"""

from __future__ import annotations

INTERACTION_PREFIX = "interaction:"


def interaction_message_id(interaction_id: int) -> str:
    """The ``message_id`` a slash command is stored under."""
    return f"{INTERACTION_PREFIX}{interaction_id}"


def message_snowflake(value: str | None) -> int | None:
    """The Discord snowflake written in ``value``; ``None`` for anything else (interactions)."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)
