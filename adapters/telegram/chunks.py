"""Cut a Markdown reply into Telegram messages that each fit the 4,096 limit.

Telegram limits the text *after* entity parsing to 4,096 characters, counted in UTF-16
code units. We measure the HTML we send instead, which is never shorter than the text it
shows, and the Markdown source, which is what goes out if Telegram cannot parse our HTML.
When a converted chunk is still over the limit (escapes, ``<pre>`` wrappers, emoji count
twice), its Markdown is split again, smaller, until every piece fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram.constants import MessageLimit

from adapters.splitting import split_markdown
from adapters.telegram.formatting import markdown_to_html

MESSAGE_LIMIT = int(MessageLimit.MAX_TEXT_LENGTH)
MIN_SPLIT = 16
"""The smallest limit :func:`split_markdown` accepts."""
MIN_LIMIT = 256
"""Room enough for the HTML of any 16-character piece (escapes and tags included)."""
SHRINK_MARGIN = 0.9
"""Aim a little under the proportional size when re-splitting, so one retry usually fits."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One Telegram message of a reply."""

    html: str
    """What is sent with ``parse_mode=HTML``; empty when the Markdown renders to nothing."""
    plain: str
    """The chunk's Markdown source, sent as plain text when Telegram refuses the HTML."""


def utf16_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (most emoji count two)."""
    return len(text.encode("utf-16-le")) // 2


def render_chunks(markdown: str, limit: int = MESSAGE_LIMIT) -> list[Chunk]:
    """The messages to send for ``markdown``, in order; each fits ``limit`` both ways.

    Chunks that render to nothing but whitespace are left out.

    Raises:
        ValueError: ``limit`` is under 256.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"`limit` must be at least {MIN_LIMIT} characters")
    chunks: list[Chunk] = []
    for piece in split_markdown(markdown.strip(), limit):
        chunks.extend(_fit(piece, limit))
    return [chunk for chunk in chunks if chunk.plain.strip()]


def _fit(piece: str, limit: int) -> list[Chunk]:
    rendered = markdown_to_html(piece)
    size = max(utf16_length(rendered), utf16_length(piece))
    if size <= limit or len(piece) <= MIN_SPLIT:
        # A piece this short always fits MIN_LIMIT; the second test only ends the recursion.
        return [Chunk(html=rendered, plain=piece)]
    smaller = max(MIN_SPLIT, min(len(piece) - 1, int(len(piece) * limit / size * SHRINK_MARGIN)))
    return [chunk for part in split_markdown(piece, smaller) for chunk in _fit(part, limit)]
