"""Split a Markdown reply into chunks under a platform's length limit.

Cuts go at paragraph boundaries first, then sentences, then words, and only as a last
resort inside a word. A cut never lands inside a fenced code block (a long block becomes
several well-formed blocks, each fenced with the same language) nor inside an inline
entity (code span, bold, italic, strikethrough, link) unless the entity alone exceeds the
limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

PARAGRAPH_SEPARATOR = "\n\n"
_FENCE = re.compile(r"^(\s*)(```|~~~)([^\n`]*)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])")
"""After Western sentence ends (and their spaces) or CJK full stops, which take no space."""
_INLINE_ENTITIES = re.compile(
    r"`[^`\n]+`"  # code span
    r"|\*\*[^\n]+?\*\*"  # bold
    r"|__[^\n]+?__"  # bold / underline
    r"|~~[^\n]+?~~"  # strikethrough
    r"|\[[^\]\n]+\]\([^)\s]+\)"  # link
    r"|(?<![\w*])\*[^*\n]+\*(?![\w*])"  # italic
    r"|(?<![\w_])_[^_\n]+_(?![\w_])"  # italic
)


@dataclass(frozen=True, slots=True)
class _Block:
    text: str
    fence: str | None = None
    """The opening fence line (with language) when the block is fenced code."""


def _blocks(text: str) -> Iterator[_Block]:
    lines = text.split("\n")
    paragraph: list[str] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            if lines[i].strip():
                paragraph.append(lines[i])
            elif paragraph:
                yield _Block("\n".join(paragraph))
                paragraph = []
            i += 1
            continue
        if paragraph:
            yield _Block("\n".join(paragraph))
            paragraph = []
        marker = match.group(2)
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(marker):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end of an unterminated block)
        opening = f"{match.group(1)}{marker}{match.group(3)}"
        closing = f"{match.group(1)}{marker}"
        yield _Block("\n".join([opening, *body, closing]), fence=opening)
    if paragraph:
        yield _Block("\n".join(paragraph))


def _protected(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _INLINE_ENTITIES.finditer(text)]


def _safe(cut: int, spans: list[tuple[int, int]]) -> bool:
    return all(not (start < cut < end) for start, end in spans)


def _best_cut(text: str, limit: int) -> int:
    """Where to cut ``text`` (longer than ``limit``) so the head fits.

    The latest sentence end, else line break, else space that is not inside an inline
    entity; else the latest position outside one; else ``limit``.
    """
    spans = _protected(text)
    window = text[: limit + 1]
    for pattern in (_SENTENCE_END, re.compile(r"\n"), re.compile(r"\s+")):
        cuts = [m.start() for m in pattern.finditer(window) if 0 < m.start() <= limit]
        for cut in reversed(cuts):
            if _safe(cut, spans):
                return cut
    for cut in range(limit, 0, -1):
        if _safe(cut, spans):
            return cut
    return limit


def _split_prose(text: str, limit: int) -> list[str]:
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _best_cut(rest, limit)
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if head:
            pieces.append(head)
    if rest:
        pieces.append(rest)
    return pieces


def _split_code(block: _Block, limit: int) -> list[str]:
    assert block.fence is not None
    lines = block.text.split("\n")[1:-1]
    closing = block.text.split("\n")[-1]
    overhead = len(block.fence) + len(closing) + 2
    room = limit - overhead
    if room < 1:
        return _split_prose(block.text, limit)
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        parts = [line[i : i + room] for i in range(0, len(line), room)] or [""]
        for part in parts:
            extra = len(part) + (1 if current else 0)
            if current and size + extra > room:
                pieces.append("\n".join([block.fence, *current, closing]))
                current, size = [], 0
                extra = len(part)
            current.append(part)
            size += extra
    if current or not pieces:
        pieces.append("\n".join([block.fence, *current, closing]))
    return pieces


def split_markdown(text: str, limit: int) -> list[str]:
    """Chunks of ``text``, each at most ``limit`` characters, in order.

    Raises:
        ValueError: ``limit`` is too small to hold anything useful (under 16).
    """
    if limit < 16:
        raise ValueError("`limit` must be at least 16 characters")
    if len(text) <= limit:
        return [text] if text else []
    pieces: list[str] = []
    for block in _blocks(text):
        if len(block.text) <= limit:
            pieces.append(block.text)
        elif block.fence is not None:
            pieces.extend(_split_code(block, limit))
        else:
            pieces.extend(_split_prose(block.text, limit))
    chunks: list[str] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + len(PARAGRAPH_SEPARATOR) + len(piece) <= limit:
            chunks[-1] += PARAGRAPH_SEPARATOR + piece
        else:
            chunks.append(piece)
    return chunks
