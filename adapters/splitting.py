"""Cut a document into messages that each fit a platform's limit, losing nothing.

The cuts work on the parsed document (:mod:`adapters.document`), never on Markdown text, so
a cut cannot land inside a fence or leave markup half open: every message is rendered on
its own from whole or sliced blocks. Blocks are packed in order; a block that does not fit
the current message starts the next one, and a block too big for any message is cut where
a reader would expect it: between its blocks or list items, then after a sentence, at a
line break, at a space outside formatting, at a space, and only as a last resort inside a
word (never inside a character a reader sees as one). A cut code block continues as a
code block of the same language in the next message; a cut list item continues without a
second bullet.

Sizes come from the platform (its markup, measured the way it counts), so whatever the
renderer adds (escapes, tags, fences, bullets) is counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import regex

from adapters.document import (
    Block,
    CodeBlock,
    CodeSpan,
    Heading,
    Inline,
    LineBreak,
    Link,
    ListBlock,
    ListItem,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Text,
    inline_text,
)

Measure = Callable[[Block], tuple[int, ...]]
"""A block's size by each limit the platform applies (e.g. markup and plain-text fallback)."""

_SEPARATOR = "\n\n"
"""Stands between blocks in a block's flat text (a seam, not text)."""
_RULE_TEXT = "-"
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?P<space>\s+)|[。！？]")  # noqa: RUF001
_LINE_BREAK = re.compile(r"[^\S\n]*\n\s*")
_SPACE = re.compile(r"\s+")
_WHITESPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")
_GRAPHEME = regex.compile(r"\X")
_Part = TypeVar("_Part", Block, ListItem)
_NATURAL_TIERS = 5
"""Tiers 0-4 (seams, sentences, lines, spaces outside formatting, spaces) read naturally."""


def split_document(
    blocks: Sequence[Block], measure: Measure, limit: int
) -> list[tuple[Block, ...]]:
    """The blocks of each message, in order; each message measures at most ``limit``.

    Blocks are joined by one line break, or two where the author left a blank line, and
    those count towards the limit too.
    """
    chunks: list[tuple[Block, ...]] = []
    current: list[Block] = []
    used: tuple[int, ...] = ()
    pending = list(reversed(blocks))
    while pending:
        block = pending.pop()
        separator = _separator(block) if current else 0
        flat = _flatten(block)
        # Every visible character counts at least once in any platform's measure, so a
        # block with more of them than the limit is cut without rendering it whole.
        size = measure(block) if _shown(flat.text) <= limit else None
        if size is not None and _within(used, separator, size, limit):
            current.append(block)
            used = _add(used, separator, size)
            continue
        if current and size is not None and _within((), 0, size, limit):
            chunks.append(tuple(current))
            current, used = [block], size
            continue
        base, base_separator = used, separator

        def fits(head: Block, base: tuple[int, ...] = base, sep: int = base_separator) -> bool:
            return _within(base, sep, measure(head), limit)

        cut = _cut(block, flat, fits, limit, natural_only=bool(current))
        if cut is None:
            if current:
                chunks.append(tuple(current))
                current, used = [], ()
                pending.append(block)
                continue
            flattened = _flattened(block)
            cut = _cut(flattened, _flatten(flattened), fits, limit, natural_only=False)
            if cut is None:
                raise ValueError(f"`limit` {limit} cannot hold a single character")
        head, tail = cut
        current.append(head)
        chunks.append(tuple(current))
        current, used = [], ()
        if tail is not None:
            pending.append(tail)
    if current:
        chunks.append(tuple(current))
    return chunks


def split_text(
    text: str,
    limit: int,
    length: Callable[[str], int] = len,
    can_cut: Callable[[str, int], bool] | None = None,
) -> list[str]:
    """``text`` (no markup to keep whole) in pieces of at most ``limit`` by ``length``.

    Cuts at line breaks, then spaces, then between characters; whitespace at a cut is
    dropped. ``can_cut(text, i)`` may forbid a cut before ``text[i]``.
    """
    pieces: list[str] = []
    rest = text.strip()
    while rest and length(rest) > limit:
        allowed = [c for c in _boundaries(rest) if can_cut is None or can_cut(rest, c)]
        best = _longest_prefix(rest, allowed, length, limit)
        if best is None:  # one cluster longer than the limit: cut it rather than fail
            best = _longest_prefix(rest, list(range(1, len(rest))), length, limit)
        if best is None:
            raise ValueError(f"`limit` {limit} cannot hold a single character")
        head_end, tail_start = best, best
        for pattern in (_LINE_BREAK, _SPACE):
            runs = [
                m.span() for m in pattern.finditer(rest, 0, best + 1)
                if best // 2 <= m.start() <= best and m.start() > 0
            ]  # fmt: skip
            if runs:
                head_end, tail_start = runs[-1]
                break
        pieces.append(rest[:head_end].rstrip())
        rest = rest[tail_start:].lstrip()
    if rest:
        pieces.append(rest)
    return [piece for piece in pieces if piece]


def _longest_prefix(
    text: str, positions: list[int], length: Callable[[str], int], limit: int
) -> int | None:
    return _largest(positions, lambda c: length(text[:c]) <= limit)


# Packing ----------------------------------------------------------------------------------


def _separator(block: Block) -> int:
    return 2 if block.gap else 1


def _add(used: tuple[int, ...], separator: int, size: tuple[int, ...]) -> tuple[int, ...]:
    if not used:
        return size
    return tuple(u + separator + s for u, s in zip(used, size, strict=True))


def _within(used: tuple[int, ...], separator: int, size: tuple[int, ...], limit: int) -> bool:
    return all(total <= limit for total in _add(used, separator, size))


def _flattened(block: Block) -> Paragraph | CodeBlock:
    """The block's text without its nesting, for limits too small for that nesting.

    Text that held code stays preformatted: as prose, a renderer would have to neutralise
    the backticks and whitespace that are the code's content.
    """
    flat = _flatten(block)
    if flat.verbatim:
        return CodeBlock(flat.text, gap=block.gap)
    return Paragraph((Text(flat.text),), gap=block.gap)


# Cutting one block ------------------------------------------------------------------------


@dataclass
class _Flat:
    """A block's text in one string, with what a cut must respect."""

    text: str = ""
    protected: list[tuple[int, int]] = field(default_factory=list)
    """Inline entities (emphasis, links, code spans): cut inside only when nothing else fits."""
    verbatim: list[tuple[int, int]] = field(default_factory=list)
    """Code: whitespace there is content, so a cut drops at most one line break."""
    seams: list[tuple[int, int]] = field(default_factory=list)
    """Between two blocks or list items: ``(end of one, start of the next)``."""


def _cut(
    block: Block, flat: _Flat, fits: Callable[[Block], bool], limit: int, *, natural_only: bool
) -> tuple[Block, Block | None] | None:
    """The largest head of ``block`` that ``fits``, cut at the best place, and the rest."""
    size = len(flat.text)
    window = _window(flat.text, limit)

    def head_fits(end: int) -> bool:
        head = _slice(block, 0, end)
        return head is None or fits(head)

    boundaries = _boundaries(flat.text[: window + 1])
    most = _largest(boundaries, head_fits)
    if most is None:  # one cluster longer than the limit: cut it rather than fail
        most = _largest(list(range(1, min(size, window + 1))), head_fits)
        if most is None:
            return None
    for tier, candidates in enumerate(_candidates(flat, boundaries, most)):
        if natural_only and tier >= _NATURAL_TIERS:
            return None
        floor = most // 2 if tier < len(_TIERS) - 1 else 0
        for head_end, tail_start in reversed(candidates):
            if head_end > most or head_end < floor or head_end <= 0:
                continue
            head = _slice(block, 0, head_end)
            if head is not None and fits(head):
                return head, _slice(block, tail_start, size)
            break
    head = _slice(block, 0, most)
    return (head, _slice(block, most, size)) if head is not None else None


def _shown(text: str) -> int:
    """How many characters of ``text`` are not whitespace: a floor for any measure."""
    return len(text) - len(_WHITESPACE.findall(text))


def _window(text: str, limit: int) -> int:
    """A position no head can reach: past it, more than ``limit`` characters show."""
    for count, match in enumerate(_NON_SPACE.finditer(text), start=1):
        if count > limit:
            return match.start()
    return len(text)


_TIERS = ("seams", "sentences", "lines", "spaces outside entities", "spaces", "unformatted", "any")


def _candidates(flat: _Flat, boundaries: list[int], most: int) -> list[list[tuple[int, int]]]:
    """Cut points ``(head end, tail start)`` up to ``most`` by preference, each ascending."""
    full = flat.text
    text = full[: most + 1]
    inside = bytearray(len(text) + 1)
    for start, end in flat.protected:
        low, high = start + 1, min(end, len(inside))
        if high > low:
            inside[low:high] = b"\x01" * (high - low)

    def after_space(position: int) -> int:
        # A run of whitespace may go on past the window; the next message starts after it.
        match = _SPACE.match(full, position)
        return match.end() if match is not None else position

    sentences: list[tuple[int, int]] = []
    lines: list[tuple[int, int]] = []
    spaces_outside: list[tuple[int, int]] = []
    spaces: list[tuple[int, int]] = []
    for start, end in _prose_ranges(len(text), flat.verbatim):
        for m in _SENTENCE_END.finditer(text, start, end):
            head_end = m.start("space") if m.group("space") else m.end()
            if not inside[head_end]:
                sentences.append((head_end, after_space(m.end())))
        for m in _LINE_BREAK.finditer(text, start, end):
            if not inside[m.start()]:
                lines.append((m.start(), after_space(m.end())))
        for m in _SPACE.finditer(text, start, end):
            spaces.append((m.start(), after_space(m.end())))
            if not inside[m.start()]:
                spaces_outside.append(spaces[-1])
    for start, end in flat.verbatim:
        lines.extend((i, i + 1) for i in range(start, min(end, len(text))) if text[i] == "\n")
    reachable = [c for c in boundaries if c <= most]
    return [
        sorted(flat.seams),
        sorted(sentences),
        sorted(lines),
        sorted(spaces_outside),
        sorted(spaces),
        [(c, c) for c in reachable if not inside[c]],
        [(c, c) for c in reachable],
    ]


def _prose_ranges(size: int, verbatim: list[tuple[int, int]]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    position = 0
    for start, end in sorted(verbatim):
        if start > position:
            ranges.append((position, start))
        position = max(position, end)
    if position < size:
        ranges.append((position, size))
    return ranges


def _boundaries(text: str) -> list[int]:
    """Positions strictly inside ``text`` between grapheme clusters (user-perceived characters).

    A cut anywhere else splits what a reader sees as one character: an emoji ZWJ sequence
    (a family), a flag, a skin tone, a letter and its accents.
    """
    return [match.end() for match in _GRAPHEME.finditer(text)][:-1]


def _largest(positions: list[int], ok: Callable[[int], bool]) -> int | None:
    """The largest position for which ``ok`` holds, if ``ok`` is monotone (true, then false)."""
    low, high = 0, len(positions) - 1
    found: int | None = None
    while low <= high:
        middle = (low + high) // 2
        if ok(positions[middle]):
            found = positions[middle]
            low = middle + 1
        else:
            high = middle - 1
    return found


# Flat text and slicing: one coordinate system ------------------------------------------------


def _inline_length(node: Inline) -> int:
    match node:
        case Text(text) | CodeSpan(text):
            return len(text)
        case LineBreak():
            return 1
        case Styled(children=children) | Link(children=children):
            return sum(_inline_length(child) for child in children)
    raise TypeError(node)


def _children(block: Block) -> tuple[Block, ...] | tuple[ListItem, ...] | None:
    if isinstance(block, Quote):
        return block.blocks
    if isinstance(block, ListBlock):
        return block.items
    return None


def _length(block: Block | ListItem) -> int:
    match block:
        case Paragraph(inlines=inlines) | Heading(inlines=inlines):
            return sum(_inline_length(node) for node in inlines)
        case CodeBlock(code=code):
            return len(code)
        case Rule():
            return len(_RULE_TEXT)
        case Quote(blocks=parts) | ListItem(blocks=parts):
            return _sequence_length(parts)
        case ListBlock(items=items):
            return _sequence_length(items)
    raise TypeError(block)


def _sequence_length(parts: Sequence[Block | ListItem]) -> int:
    return sum(_length(part) for part in parts) + len(_SEPARATOR) * max(0, len(parts) - 1)


def _flatten(block: Block | ListItem, flat: _Flat | None = None) -> _Flat:
    flat = flat if flat is not None else _Flat()
    match block:
        case Paragraph(inlines=inlines) | Heading(inlines=inlines):
            for node in inlines:
                start = len(flat.text)
                flat.text += inline_text((node,))
                if not isinstance(node, (Text, LineBreak)):
                    flat.protected.append((start, len(flat.text)))
        case CodeBlock(code=code):
            start = len(flat.text)
            flat.text += code
            flat.verbatim.append((start, len(flat.text)))
        case Rule():
            flat.text += _RULE_TEXT
        case Quote(blocks=parts) | ListItem(blocks=parts):
            _flatten_sequence(parts, flat)
        case ListBlock(items=items):
            _flatten_sequence(items, flat)
    return flat


def _flatten_sequence(parts: Sequence[Block | ListItem], flat: _Flat) -> None:
    for index, part in enumerate(parts):
        if index:
            end = len(flat.text)
            flat.text += _SEPARATOR
            flat.seams.append((end, len(flat.text)))
        _flatten(part, flat)


def _slice(block: Block, start: int, end: int) -> Block | None:
    """The part of ``block`` between two positions of its flat text; ``None`` if empty."""
    match block:
        case Paragraph(inlines=inlines) | Heading(inlines=inlines):
            part = _slice_inlines(inlines, start, end)
            return replace(block, inlines=part) if inline_text(part).strip() else None
        case CodeBlock(code=code):
            text = code[start:end]
            return replace(block, code=text) if text.strip() else None
        case Rule():
            return block if start <= 0 < end else None
        case Quote(blocks=parts):
            blocks = [piece for _, piece in _slice_sequence(parts, start, end, _slice)]
            return replace(block, blocks=tuple(blocks)) if blocks else None
        case ListBlock(items=items):
            sliced = _slice_sequence(items, start, end, _slice_item)
            if not sliced:
                return None
            first_index = sliced[0][0]
            return replace(
                block, items=tuple(item for _, item in sliced), start=block.start + first_index
            )
    raise TypeError(block)


def _slice_item(item: ListItem, start: int, end: int) -> ListItem | None:
    blocks = [piece for _, piece in _slice_sequence(item.blocks, start, end, _slice)]
    if not blocks:
        return None
    return ListItem(tuple(blocks), continued=item.continued or start > 0)


def _slice_sequence(
    parts: Sequence[_Part], start: int, end: int, cut: Callable[[_Part, int, int], _Part | None]
) -> list[tuple[int, _Part]]:
    out: list[tuple[int, _Part]] = []
    position = 0
    for index, part in enumerate(parts):
        if position >= end:
            break
        part_start, part_end = position, position + _length(part)
        position = part_end + len(_SEPARATOR)
        if part_end <= start:
            continue
        if start <= part_start and part_end <= end:
            out.append((index, part))
            continue
        piece = cut(part, max(start, part_start) - part_start, min(end, part_end) - part_start)
        if piece is not None:
            out.append((index, piece))
    return out


def _slice_inlines(nodes: Sequence[Inline], start: int, end: int) -> tuple[Inline, ...]:
    out: list[Inline] = []
    position = 0
    for node in nodes:
        if position >= end:
            break
        node_start, node_end = position, position + _inline_length(node)
        position = node_end
        if node_end <= start:
            continue
        low, high = max(start, node_start) - node_start, min(end, node_end) - node_start
        match node:
            case Text(text):
                out.append(Text(text[low:high]))
            case CodeSpan(text):
                out.append(CodeSpan(text[low:high]))
            case LineBreak():
                out.append(node)
            case Styled(children=children):
                part = _slice_inlines(children, low, high)
                if part:
                    out.append(replace(node, children=part))
            case Link(children=children):
                # A link cut in two is a link only where its label ends, so a target shown
                # after the label is shown once.
                part = _slice_inlines(children, low, high)
                if high < node_end - node_start:
                    out.extend(part)
                elif part:
                    out.append(replace(node, children=part))
    return tuple(out)
