"""Message ids that are unique per bot: Telegram numbers messages per chat only.

Hubbub deduplicates and finds messages by ``(bot, platform message id)``, so a Telegram
message is known as ``"{chat_id}:{message_id}"`` everywhere outside this package.
"""

from __future__ import annotations

SEPARATOR = ":"


def compose_message_id(chat_id: int | str, message_id: int) -> str:
    """The bot-wide id of message ``message_id`` in chat ``chat_id``."""
    return f"{chat_id}{SEPARATOR}{message_id}"


def parse_message_id(value: str) -> tuple[str, int]:
    """``(chat_id, message_id)`` from an id made by :func:`compose_message_id`.

    Raises:
        ValueError: ``value`` is not of the form ``"<chat id>:<message id>"``.
    """
    chat_id, separator, message_id = value.rpartition(SEPARATOR)
    if not separator or not chat_id or not message_id.isdigit():
        raise ValueError(f"not a Telegram message id: {value!r} (expected '<chat id>:<number>')")
    return chat_id, int(message_id)
