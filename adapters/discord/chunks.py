"""Cut a reply into Discord messages of at most 2,000 characters.

Discord counts the characters (code points) of ``content``, as its API does. The cuts come
from :func:`adapters.splitting.split_document`; each message is rendered on its own, so a
code block cut across messages is fenced, with its language, in each, and formatting never
runs from one message into the next.
"""

from __future__ import annotations

from adapters.discord.formatting import DiscordRenderer, to_literal_text
from adapters.document import Block, parse
from adapters.splitting import split_document, split_text

MESSAGE_LIMIT = 2000
"""Discord's maximum ``content`` length for a message."""
MIN_LIMIT = 16
"""The smallest limit accepted: room for some text inside any markup."""


def render_chunks(markdown: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """The Discord messages for ``markdown``, in order, none blank, each within ``limit``.

    A reply whose Markdown shows nothing (only link definitions, say) is sent as its
    source text, escaped, rather than dropped.

    Raises:
        ValueError: ``limit`` is under 16.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"`limit` must be at least {MIN_LIMIT} characters")
    chunks = [
        DiscordRenderer().document(part)
        for part in split_document(parse(markdown), _measure, limit)
    ]
    chunks = [chunk for chunk in chunks if chunk.strip()]
    if chunks or not markdown.strip():
        return chunks
    return split_message(to_literal_text(markdown.strip()), limit)


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Already escaped text (the literal fallback) in messages of at most ``limit``.

    Cuts at line breaks or spaces where it can, never between a backslash and the
    character it escapes.

    Raises:
        ValueError: ``limit`` is under 16.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"`limit` must be at least {MIN_LIMIT} characters")
    return split_text(text, limit, can_cut=_not_after_escape)


def _not_after_escape(text: str, position: int) -> bool:
    start = position
    while start and text[start - 1] == "\\":
        start -= 1
    return (position - start) % 2 == 0


def _measure(block: Block) -> tuple[int]:
    return (len(DiscordRenderer().block(block)),)
