"""Parse a Markdown reply once into the platform-free document every renderer shares.

markdown-it (CommonMark plus strikethrough and tables) decides the structure, so fences
follow CommonMark's rules (a fence closes only with at least as many of the same
character and no info string; ``~~~`` and indented fences work; an unclosed fence runs to
the end). The tree is reduced to what the platforms can show: paragraphs, headings, code
blocks, quotes, lists and rules, with text, code spans, emphasis, links and line breaks
inside. Raw HTML stays text (only ``<br>`` becomes a line break), a table becomes an
aligned monospace block, a task-list box becomes ``☐`` or ``☑``, and lone surrogates become
U+FFFD so no platform client chokes on them.

Every block remembers whether the author left a blank line before it, so renderers keep
the spacing as written. Renderers live beside each platform; :mod:`adapters.splitting`
cuts a document into messages.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import regex
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

Style = Literal["strong", "em", "strike"]

TASK_OPEN = "☐"
TASK_DONE = "☑"
_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_STYLES: dict[str, Style] = {"strong": "strong", "em": "em", "s": "strike"}
_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TASK = re.compile(r"^\[(?P<mark>[ xX])\](?=\s)")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_NEWLINE = re.compile(r"\r\n?")
_GRAPHEME = regex.compile(r"\X")
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")
"""markdown-it counts lines after turning CR LF and CR into LF; so must we."""


# Inline content ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text, exactly as the reader should see it (never markup)."""

    text: str


@dataclass(frozen=True, slots=True)
class CodeSpan:
    """Inline code."""

    text: str


@dataclass(frozen=True, slots=True)
class LineBreak:
    """A line break inside a paragraph (soft or hard: chat apps show both as one)."""


@dataclass(frozen=True, slots=True)
class Styled:
    """Bold, italic or strikethrough text."""

    style: Style
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Link:
    """A link (or an image, shown as a link to it); ``children`` are its label."""

    href: str
    children: tuple[Inline, ...]


Inline = Text | CodeSpan | LineBreak | Styled | Link


# Blocks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph of inline content."""

    inlines: tuple[Inline, ...]
    gap: bool = False
    """Whether a blank line separates it from the block before (as the author wrote it)."""


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading (``level`` 1 to 6)."""

    level: int
    inlines: tuple[Inline, ...]
    gap: bool = False


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """Preformatted text: a fenced or indented code block, or a table laid out in columns."""

    code: str
    language: str = ""
    """The first word of the fence's info string, unchecked (renderers validate it)."""
    gap: bool = False


@dataclass(frozen=True, slots=True)
class Quote:
    """A block quote."""

    blocks: tuple[Block, ...]
    gap: bool = False


@dataclass(frozen=True, slots=True)
class ListItem:
    """One item of a list."""

    blocks: tuple[Block, ...]
    continued: bool = False
    """The rest of an item cut across messages: shown without its bullet or number."""


@dataclass(frozen=True, slots=True)
class ListBlock:
    """A bulleted or numbered list; ``start`` is the first item's number."""

    items: tuple[ListItem, ...]
    ordered: bool = False
    start: int = 1
    tight: bool = True
    """Items separated by line breaks rather than blank lines."""
    gap: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """A horizontal rule."""

    gap: bool = False


Block = Paragraph | Heading | CodeBlock | Quote | ListBlock | Rule


class _Source:
    """The Markdown's lines, to tell where blocks really end."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines

    def last_line(self, node: SyntaxTreeNode) -> int:
        """The line after ``node``'s last non-blank line (markdown-it counts trailing blanks)."""
        assert node.map is not None
        start, end = node.map[0], min(node.map[1], len(self.lines))
        while end > start + 1 and not self.lines[end - 1].strip():
            end -= 1
        return end


def parse(markdown: str) -> tuple[Block, ...]:
    """The document ``markdown`` describes; empty when it shows nothing."""
    text = _NEWLINE.sub("\n", _LONE_SURROGATE.sub("\ufffd", markdown))
    source = _Source(text.split("\n"))
    return _blocks(SyntaxTreeNode(_PARSER.parse(text)).children, source)


def inline_text(inlines: Iterable[Inline]) -> str:
    """The text ``inlines`` show, without markup (a line break is a newline)."""
    parts: list[str] = []
    for node in inlines:
        match node:
            case Text(text) | CodeSpan(text):
                parts.append(text)
            case LineBreak():
                parts.append("\n")
            case Styled(children=children) | Link(children=children):
                parts.append(inline_text(children))
    return "".join(parts)


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font.

    Counted per grapheme cluster: East Asian wide characters and emoji (a ZWJ family, a
    flag, an emoji with a skin tone or the emoji variation selector) take two, accents none.
    """
    return sum(_cluster_width(cluster) for cluster in _GRAPHEME.findall(text))


def _cluster_width(cluster: str) -> int:
    visible = [ch for ch in cluster if unicodedata.category(ch) not in ("Mn", "Me", "Cf")]
    if not visible:
        return 0
    wide = any(unicodedata.east_asian_width(ch) in ("W", "F") for ch in visible)
    emoji = "\ufe0f" in cluster or (len(visible) > 1 and _REGIONAL.match(visible[0]) is not None)
    return 2 if wide or emoji else 1


# Tree to document --------------------------------------------------------------------------


def _blocks(nodes: Iterable[SyntaxTreeNode], source: _Source) -> tuple[Block, ...]:
    out: list[Block] = []
    previous_end: int | None = None
    for node in nodes:
        block = _block(node, source)
        if block is None or node.map is None:
            continue
        gap = previous_end is not None and node.map[0] > previous_end
        out.append(replace(block, gap=gap))
        previous_end = source.last_line(node)
    return tuple(out)


def _block(node: SyntaxTreeNode, source: _Source) -> Block | None:
    kind = node.type
    if kind == "paragraph":
        inlines = _inline_children(node)
        return Paragraph(inlines) if inline_text(inlines).strip() else None
    if kind == "heading":
        inlines = _inline_children(node)
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        return Heading(level, inlines) if inline_text(inlines).strip() else None
    if kind in ("fence", "code_block"):
        code = node.content.rstrip("\n")
        language = node.info.split()[0] if node.info.strip() else ""
        return CodeBlock(code, language) if code.strip() else None
    if kind == "blockquote":
        blocks = _blocks(node.children, source)
        return Quote(blocks) if blocks else None
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, source)
    if kind == "table":
        return _table(node)
    if kind == "hr":
        return Rule()
    # html_block is off in the parser; anything unexpected is shown as its source text.
    content = node.content.strip()
    return Paragraph((Text(content),)) if content else None


def _list(node: SyntaxTreeNode, source: _Source) -> ListBlock | None:
    ordered = node.type == "ordered_list"
    start = int(node.attrs.get("start", 1) or 1) if ordered else 1
    tight = all(
        child.hidden for item in node.children for child in item.children
        if child.type == "paragraph"
    )  # fmt: skip
    items = tuple(ListItem(_task_box(_blocks(item.children, source))) for item in node.children)
    items = tuple(item for item in items if item.blocks)
    return ListBlock(items, ordered, start, tight) if items else None


def _task_box(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    """``[ ] todo`` / ``[x] done`` at the start of an item: a box, as GitHub shows it."""
    if not blocks or not isinstance(blocks[0], Paragraph):
        return blocks
    first = blocks[0]
    head = first.inlines[0] if first.inlines else None
    if not isinstance(head, Text):
        return blocks
    match = _TASK.match(head.text)
    if match is None:
        return blocks
    box = TASK_OPEN if match.group("mark") == " " else TASK_DONE
    boxed = Text(box + head.text[match.end() :])
    return (replace(first, inlines=(boxed, *first.inlines[1:])), *blocks[1:])


def _table(node: SyntaxTreeNode) -> CodeBlock | None:
    rows = [
        [_cell_text(cell) for cell in row.children]
        for section in node.children
        for row in section.children
    ]
    if not rows:
        return None
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    widths = [max(display_width(row[i]) for row in rows) for i in range(columns)]

    def line(row: list[str]) -> str:
        cells = (cell + " " * (widths[i] - display_width(cell)) for i, cell in enumerate(row))
        return " | ".join(cells).rstrip()

    lines = [line(row) for row in rows]
    if len(rows) > 1:
        lines.insert(1, "-+-".join("-" * width for width in widths))
    code = "\n".join(lines)
    return CodeBlock(code) if code.strip() else None


def _cell_text(cell: SyntaxTreeNode) -> str:
    """A cell as one line of text: markup dropped, links followed by their target."""
    return _plain_line(_inline_children(cell)).strip()


def _plain_line(inlines: Iterable[Inline]) -> str:
    parts: list[str] = []
    for node in inlines:
        match node:
            case Text(text) | CodeSpan(text):
                parts.append(text)
            case LineBreak():
                parts.append(" ")
            case Styled(children=children):
                parts.append(_plain_line(children))
            case Link(href, children):
                label = _plain_line(children)
                parts.append(f"{label} ({href})" if label and label != href else label or href)
    return "".join(parts)


def _inline_children(node: SyntaxTreeNode) -> tuple[Inline, ...]:
    out: list[Inline] = []
    for child in node.children:
        out.extend(_inline(child))
    return _merge_text(out)


def _inline(node: SyntaxTreeNode) -> Iterable[Inline]:
    kind = node.type
    if kind == "inline":
        return _inline_children(node)
    if kind == "text":
        return _text_with_breaks(node.content)
    if kind in ("softbreak", "hardbreak"):
        return (LineBreak(),)
    if kind == "code_inline":
        return (CodeSpan(node.content),) if node.content else ()
    if kind in _STYLES:
        children = _inline_children(node)
        return (Styled(_STYLES[kind], children),) if children else ()
    if kind in ("link", "image"):
        # A link without a label shows its target; an image is a link to it, labelled by
        # its alt text.
        href = str(node.attrs.get("href" if kind == "link" else "src", ""))
        label = _inline_children(node)
        if kind == "image":
            label = _text(_plain_line(label))
        return (Link(href, label or _text(href)),) if href or label else ()
    # html_inline is off in the parser; anything unexpected is shown as its source text.
    return _text_with_breaks(node.content)


def _text(text: str) -> tuple[Inline, ...]:
    return (Text(text),) if text else ()


def _text_with_breaks(text: str) -> tuple[Inline, ...]:
    """Text, with each ``<br>`` the model wrote as a line break."""
    out: list[Inline] = []
    for index, piece in enumerate(_BREAK_TAG.split(text)):
        if index:
            out.append(LineBreak())
        if piece:
            out.append(Text(piece))
    return tuple(out)


def _merge_text(nodes: Iterable[Inline]) -> tuple[Inline, ...]:
    out: list[Inline] = []
    for node in nodes:
        if isinstance(node, Text):
            if not node.text:
                continue
            if out and isinstance(out[-1], Text):
                out[-1] = Text(out[-1].text + node.text)
                continue
        out.append(node)
    return tuple(out)
