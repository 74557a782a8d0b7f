"""Render a reply in the Markdown dialect Discord shows, and the escaped fallback.

The reply is parsed once (:mod:`adapters.document`) and written back in Discord's
dialect: ``**bold**``, ``*italic*``, ``~~strike~~``, code spans and fenced blocks, ``#`` to
``###`` headings (deeper ones bold), ``>`` quotes, ``-`` and ``1.`` lists and masked
links. What Discord has no syntax for is drawn: tables as aligned code blocks, rules as a
line, task boxes as ``☐``/``☑``. Text is escaped wherever Discord would read it as markup
(``*``, ``_``, ``~~``, ``||`` spoilers, backticks, ``#``, ``>``, ``-#`` or a list marker at
a line start), bare URLs are left alone, and runs of backticks inside code are broken so
they cannot end the block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from adapters.document import (
    CodeBlock,
    CodeSpan,
    Heading,
    Inline,
    LineBreak,
    Link,
    Quote,
    Style,
    Styled,
    Text,
    inline_text,
    parse,
)
from adapters.rendering import Renderer

RULE = "\u2500" * 12
"""What a Markdown horizontal rule becomes (Discord has none)."""
FENCE_BREAK = "\u200b"
"""Put inside a run of three backticks in code, which would otherwise end the block."""
HEADING_LEVELS = 3
"""Discord shows ``#``, ``##`` and ``###``; deeper headings become bold lines."""

_MARKERS: dict[Style, str] = {"strong": "**", "em": "*", "strike": "~~"}
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+\-.#]+$")
_FENCE_RUN = re.compile(r"``(?=`)")
_BACKTICK_PAIR = re.compile(r"`(?=`)")
_LINKABLE = re.compile(r"^https?://", re.IGNORECASE)
_DISCORD_URL = re.compile(r"https?://[^\s<]+[^<.,:;\"')\]\s]")
"""A bare URL as Discord finds one; formatting never applies inside it."""
_LINE_START = re.compile(r"[>#]|-(?=[\s#])|[+*](?=\s)")
"""What makes a line a quote, heading, subtext or list item in Discord."""
_ASCII_WORD = re.compile(r"[A-Za-z0-9]")
_MARKUP_CHARACTER = re.compile(r"[\\*_~`|>#\-\[\]()<]")
"""Characters Discord may read as markup; a backslash makes any of them literal."""
_BARE_URL = re.compile(r"https?://[^\s<>]+")


def to_discord_markdown(markdown: str) -> str:
    """Discord-flavoured Markdown for ``markdown`` (same meaning, rendered as intended)."""
    return DiscordRenderer().document(parse(markdown))


def to_literal_text(discord_markdown: str) -> str:
    """The text with every markup character escaped (URLs kept), so Discord shows it as written.

    The fallback when Discord refuses a formatted message: the reader sees the raw
    markup, and nothing of the reply is lost.
    """
    pieces: list[str] = []
    position = 0
    for match in _BARE_URL.finditer(discord_markdown):
        pieces.append(_MARKUP_CHARACTER.sub(r"\\\g<0>", discord_markdown[position : match.start()]))
        pieces.append(match.group(0))
        position = match.end()
    pieces.append(_MARKUP_CHARACTER.sub(r"\\\g<0>", discord_markdown[position:]))
    return "".join(pieces)


class _Piece(NamedTuple):
    text: str
    markup: bool
    """Written as it is; text pieces are escaped once their neighbours are known."""
    label: bool = False
    """Text inside a masked link's label, where brackets must be escaped too."""


class DiscordRenderer(Renderer):
    """Discord Markdown."""

    def __init__(self) -> None:
        self._in_quote = False

    def paragraph(self, inlines: Sequence[Inline]) -> str:
        """Inline Markdown, escaped."""
        return _finish(self.pieces(inlines, frozenset())).strip()

    def heading(self, block: Heading) -> str:
        """``#`` to ``###``; deeper levels as a bold line."""
        if block.level <= HEADING_LEVELS:
            inner = _finish(self.pieces(block.inlines, frozenset())).strip()
            return f"{'#' * block.level} {inner}"
        inner = _finish(self.pieces(block.inlines, frozenset({"strong"}))).strip()
        return f"**{inner}**"

    def code_block(self, block: CodeBlock) -> str:
        """A fenced block; the language only when Discord would read it as one."""
        language = block.language if _LANGUAGE.match(block.language) else ""
        return f"```{language}\n{_FENCE_RUN.sub('``' + FENCE_BREAK, block.code)}\n```"

    def quote(self, block: Quote) -> str:
        """Every line behind ``> ``; a quote inside a quote joins it (Discord nests none)."""
        if self._in_quote:
            return self.join(block.blocks)
        self._in_quote = True
        try:
            inner = self.join(block.blocks)
        finally:
            self._in_quote = False
        return "\n".join(f"> {line}" for line in inner.split("\n"))

    def rule(self) -> str:
        """A line."""
        return RULE

    def list_marker(self, ordered: bool, number: int) -> str:
        """Discord's own list syntax."""
        return f"{number}." if ordered else "-"

    def nested_indent(self, marker: str) -> str:
        """Under the item's text, as Discord expects nested lists."""
        return " " * (len(marker) + 1)

    def pieces(
        self, nodes: Sequence[Inline], active: frozenset[Style], *, in_link: bool = False
    ) -> list[_Piece]:
        """Inline content; ``active`` styles already surround it (repeats are dropped)."""
        out: list[_Piece] = []
        for node in nodes:
            match node:
                case Text(text):
                    out.append(_Piece(text, markup=False, label=in_link))
                case LineBreak():
                    out.append(_Piece("\n", markup=True))
                case CodeSpan(text):
                    out.append(_Piece(_code_span(text), markup=True))
                case Styled(style, children):
                    inner = self.pieces(children, active | {style}, in_link=in_link)
                    if style in active:
                        out.extend(inner)
                    else:
                        out.extend(_around(_MARKERS[style], inner))
                case Link(href, children):
                    out.extend(self.link(href, children, active, in_link=in_link))
        return out

    def link(
        self, href: str, children: Sequence[Inline], active: frozenset[Style], *, in_link: bool
    ) -> list[_Piece]:
        """A masked link for web URLs; anything else shows its target after its label."""
        shown = inline_text(children)
        if in_link or not _LINKABLE.match(href):
            label = self.pieces(children, active, in_link=in_link)
            if not href or href == shown:
                return label
            return [*label, _Piece(f" ({href})", markup=False, label=in_link)]
        target = href.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        if shown == href:
            return [_Piece(f"<{target}>", markup=True)]
        label = self.pieces(children, active, in_link=True)
        return [_Piece("[", markup=True), *label, _Piece(f"]({target})", markup=True)]


def _around(marker: str, inner: list[_Piece]) -> list[_Piece]:
    """``inner`` between markers, its edge whitespace moved outside (Discord needs that)."""
    pieces = list(inner)
    lead: list[_Piece] = []
    trail: list[_Piece] = []
    while pieces and not pieces[0].markup and not pieces[0].text.lstrip():
        lead.append(pieces.pop(0))
    while pieces and not pieces[-1].markup and not pieces[-1].text.rstrip():
        trail.insert(0, pieces.pop())
    if not pieces:
        return [*lead, *trail]
    first = pieces[0]
    if not first.markup and first.text != first.text.lstrip():
        core = first.text.lstrip()
        lead.append(first._replace(text=first.text[: len(first.text) - len(core)]))
        pieces[0] = first._replace(text=core)
    last = pieces[-1]
    if not last.markup and last.text != last.text.rstrip():
        core = last.text.rstrip()
        trail.insert(0, last._replace(text=last.text[len(core) :]))
        pieces[-1] = last._replace(text=core)
    return [*lead, _Piece(marker, markup=True), *pieces, _Piece(marker, markup=True), *trail]


def _code_span(text: str) -> str:
    """A code span Discord cannot mistake for a code block.

    Three backticks anywhere start a block in Discord, so backticks inside are kept apart
    (a zero-width space between two) and the span is fenced with one or two.
    """
    code = _BACKTICK_PAIR.sub("`" + FENCE_BREAK, text)
    fence = "``" if "`" in code else "`"
    padded = f" {code} " if code.startswith("`") or code.endswith("`") else code
    return f"{fence}{padded}{fence}"


def _finish(pieces: Sequence[_Piece]) -> str:
    """The pieces' text, each text piece escaped with its neighbours in view."""
    merged: list[_Piece] = []
    for piece in pieces:
        if not piece.text:
            continue
        previous = merged[-1] if merged else None
        mergeable = previous is not None and not (piece.markup or previous.markup)
        if previous is not None and mergeable and previous.label == piece.label:
            merged[-1] = previous._replace(text=previous.text + piece.text)
            continue
        merged.append(piece)
    out: list[str] = []
    for index, piece in enumerate(merged):
        if piece.markup:
            text = piece.text
        else:
            before = out[-1][-1:] if out else ""
            after = merged[index + 1].text[:1] if index + 1 < len(merged) else ""
            text = _escape(piece, before, after, line_start=not out or before == "\n")
        if out and out[-1].endswith("`") and text.startswith("`"):
            # An escaped backtick against a code span's ``, say, makes three in a row,
            # which opens a code block in Discord: the pieces' backticks are kept apart.
            out.append(FENCE_BREAK)
        out.append(text)
    return "".join(out)


def _escape(piece: _Piece, before: str, after: str, *, line_start: bool) -> str:
    """A text piece with what Discord would read as markup escaped; bare URLs untouched."""
    text = piece.text
    urls = [m.span() for m in _DISCORD_URL.finditer(text)] if not piece.label else []
    out: list[str] = []
    position = 0
    for start, end in [*urls, (len(text), len(text))]:
        for i in range(position, start):
            out.append(_escape_char(text, i, before, after, line_start, piece.label))
        out.append(text[start:end])
        position = end
    return "".join(out)


def _escape_char(text: str, i: int, before: str, after: str, line_start: bool, label: bool) -> str:
    ch = text[i]
    previous = text[i - 1] if i else before
    following = text[i + 1] if i + 1 < len(text) else after
    if _starts_line(text, i, line_start) and _LINE_START.match(text, i):
        return "\\" + ch
    if ch == "\\":
        return ch if following.isalnum() or following.isspace() else "\\\\"
    if ch == "*":
        spaced = (not previous or previous.isspace()) and (not following or following.isspace())
        return ch if spaced else "\\*"
    if ch == "_":
        intraword = bool(_ASCII_WORD.match(previous)) and bool(_ASCII_WORD.match(following))
        return ch if intraword else "\\_"
    if ch in "~|":
        return "\\" + ch if ch in (previous, following) else ch
    if ch == "`" or (ch in "[]" and label) or (ch == "[" and "](" in text[i:]):
        return "\\" + ch
    if ch in ".)" and following.isspace() and _numbers_line(text, i, line_start):
        return "\\" + ch
    return ch


def _starts_line(text: str, i: int, line_start: bool) -> bool:
    return text[i - 1] == "\n" if i else line_start


def _numbers_line(text: str, i: int, line_start: bool) -> bool:
    """``text[i]`` follows a number that starts a line (``1. `` would make a list)."""
    start = i
    while start and text[start - 1].isdigit():
        start -= 1
    return start < i and _starts_line(text, start, line_start)
