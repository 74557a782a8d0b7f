"""Cut a reply into Telegram messages that each fit the 4,096 limit.

Telegram limits the text *after* entity parsing to 4,096 characters, counted in UTF-16
code units, so that is what is measured: the text our HTML shows, and the plain text
sent instead if Telegram ever refuses the HTML. The cuts come from
:func:`adapters.splitting.split_document`; each message is rendered on its own, so its
tags are always balanced and a code block cut across messages is a whole ``<pre>`` in
each.
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram.constants import MessageLimit

from adapters.document import Block, parse
from adapters.plaintext import PlainRenderer
from adapters.splitting import split_document, split_text
from adapters.telegram.formatting import TelegramRenderer, visible_text

MESSAGE_LIMIT = int(MessageLimit.MAX_TEXT_LENGTH)
MIN_LIMIT = 256
"""Room for any block's markup around at least one character."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One Telegram message of a reply."""

    html: str
    """What is sent with ``parse_mode=HTML``; empty when the reply renders to nothing."""
    plain: str
    """The same message as plain text, sent when Telegram refuses the HTML."""


def utf16_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (most emoji count two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def render_chunks(markdown: str, limit: int = MESSAGE_LIMIT) -> list[Chunk]:
    """The messages to send for ``markdown``, in order; each fits ``limit`` both ways.

    A reply whose Markdown shows nothing (only link definitions, say) is sent as its
    source text rather than dropped.

    Raises:
        ValueError: ``limit`` is under 256.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"`limit` must be at least {MIN_LIMIT} characters")
    chunks = [
        Chunk(html=TelegramRenderer().document(part), plain=PlainRenderer().document(part))
        for part in split_document(parse(markdown), _measure, limit)
    ]
    chunks = [chunk for chunk in chunks if chunk.html.strip()]
    if chunks or not markdown.strip():
        return chunks
    return [Chunk(html="", plain=piece) for piece in split_text(markdown, limit, utf16_length)]


def _measure(block: Block) -> tuple[int, int]:
    markup = TelegramRenderer().block(block)
    return utf16_length(visible_text(markup)), utf16_length(PlainRenderer().block(block))
