"""Cut Discord Markdown into messages Discord accepts (2,000 characters each).

The cuts come from :func:`adapters.splitting.split_markdown` (paragraph, sentence, word;
never inside a code block or an inline entity; long code blocks become several fenced
blocks). Discord measures length as its JavaScript client does, in UTF-16 code units, so
a chunk that fits in code points but not in code units (emoji, rare CJK) is cut again.
"""

from __future__ import annotations

from adapters.splitting import split_markdown

MESSAGE_LIMIT = 2000
"""Discord's maximum ``content`` length for a message."""
MIN_SPLIT_LIMIT = 16
"""The smallest limit :func:`~adapters.splitting.split_markdown` accepts."""


def utf16_length(text: str) -> int:
    """``text``'s length in UTF-16 code units (characters outside the BMP count twice)."""
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Non-blank chunks of ``text``, in order, each at most ``limit`` UTF-16 code units.

    Raises:
        ValueError: ``limit`` is too small for the splitter (under 16).
    """
    chunks: list[str] = []
    for chunk in split_markdown(text.strip(), limit):
        chunks.extend(_fit(chunk, limit))
    return [chunk for chunk in chunks if chunk.strip()]


def _fit(chunk: str, limit: int) -> list[str]:
    units = utf16_length(chunk)
    if units <= limit:
        return [chunk]
    # Fewer code points than code units: aim for a code-point limit that fits. split_markdown
    # returned chunk with len(chunk) <= limit < units, so the new limit is below len(chunk)
    # and each round makes progress.
    smaller = limit * len(chunk) // units
    if smaller < MIN_SPLIT_LIMIT:
        return _hard_cut(chunk, limit)
    pieces: list[str] = []
    for piece in split_markdown(chunk, smaller):
        pieces.extend(_fit(piece, limit))
    return pieces


def _hard_cut(text: str, limit: int) -> list[str]:
    """Cut by code units alone; only for limits too small for the Markdown splitter."""
    pieces: list[str] = []
    current: list[str] = []
    units = 0
    for char in text:
        width = utf16_length(char)
        if current and units + width > limit:
            pieces.append("".join(current))
            current, units = [], 0
        current.append(char)
        units += width
    if current:
        pieces.append("".join(current))
    return pieces
