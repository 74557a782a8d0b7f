"""Message ids that are unique per bot: a client's message id is only unique in its chat.

Hubbub deduplicates by ``(bot, platform message id)``, but web chat clients choose their
own ids: two conversations (two browsers) may both send ``"1"``. The stored id therefore
names the chat too; it is hashed to fit the column whatever the lengths of its parts.
"""

from __future__ import annotations

import hashlib

PREFIX = "wc:"


def message_key(chat_id: str, client_id: str) -> str:
    """The bot-wide id of the client's message ``client_id`` in chat ``chat_id``."""
    digest = hashlib.sha256(f"{chat_id}\0{client_id}".encode()).hexdigest()
    return f"{PREFIX}{digest}"
