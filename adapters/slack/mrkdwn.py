"""Render a reply as Slack mrkdwn.

Slack's markup differs from Markdown: ``*bold*``, ``_italic_``, ``~strike~``, links as
``<url|text>``, no headings, no tables, no nesting of the same style, and ``&``, ``<``,
``>`` must be escaped everywhere, code included (they start Slack's control sequences).
The reply is parsed once (:mod:`adapters.document`) and every entity is opened and closed
by the same element, so a message is balanced however the reply was cut. Headings become
bold lines, lists get ``•`` bullets, tables and code become code blocks (Slack shows no
language), and quotes keep their ``>``.
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

RULE = "──────────"
WORD_JOINER = "\u200b"
"""Slack only sees ``*bold*`` between non-word characters; a zero-width space next to a
letter (``**foo**bar``, or CJK text, which has no spaces) makes the boundary."""
FENCE_BREAK = "\u200b"
"""Put inside a run of three backticks in code, which would otherwise end the block."""
_MARKERS = frozenset("*_~`")
_STYLE_MARKERS: dict[Style, str] = {"strong": "*", "em": "_", "strike": "~"}
_BACKTICK_LOOKALIKE = "\u02cb"
_LINKABLE = re.compile(r"^(?:https?|mailto):", re.IGNORECASE)
_FENCE_RUN = re.compile(r"``(?=`)")


def escape(text: str) -> str:
    """Escape the three characters Slack reserves for its control sequences."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """The Slack mrkdwn for ``markdown``."""
    return SlackRenderer().document(parse(markdown))


class _Piece(NamedTuple):
    text: str
    entity: bool
    """Markup that starts and ends with a marker (needs a word boundary next to letters)."""


class SlackRenderer(Renderer):
    """Slack mrkdwn."""

    def __init__(self) -> None:
        self._in_quote = False

    def paragraph(self, inlines: Sequence[Inline]) -> str:
        """Inline mrkdwn."""
        return _join(self.pieces(inlines, frozenset())).strip()

    def heading(self, block: Heading) -> str:
        """A bold line."""
        inner = _join(self.pieces(block.inlines, frozenset({"strong"}))).strip()
        return _styled("*", inner)

    def code_block(self, block: CodeBlock) -> str:
        """A code block; runs of backticks inside are broken so they cannot end it."""
        return f"```\n{escape(_FENCE_RUN.sub('``' + FENCE_BREAK, block.code))}\n```"

    def quote(self, block: Quote) -> str:
        """Every line behind ``>``; a quote inside a quote joins it (Slack nests none)."""
        if self._in_quote:
            return self.join(block.blocks)
        self._in_quote = True
        try:
            inner = self.join(block.blocks)
        finally:
            self._in_quote = False
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def rule(self) -> str:
        """A line."""
        return RULE

    def nested_indent(self, marker: str) -> str:
        """Under the item's text."""
        return " " * (len(marker) + 1)

    def pieces(self, nodes: Sequence[Inline], active: frozenset[Style]) -> list[_Piece]:
        """Inline content; ``active`` styles already surround it (Slack cannot nest them)."""
        out: list[_Piece] = []
        for node in nodes:
            match node:
                case Text(text):
                    # Two backticks in text would make a code span: show a look-alike.
                    out.append(_Piece(escape(text).replace("`", _BACKTICK_LOOKALIKE), entity=False))
                case LineBreak():
                    out.append(_Piece("\n", entity=False))
                case CodeSpan(text):
                    code = escape(text).replace("`", _BACKTICK_LOOKALIKE)
                    entity = bool(code.strip())
                    out.append(_Piece(f"`{code}`" if entity else code, entity=entity))
                case Styled(style, children):
                    inner = _join(self.pieces(children, active | {style}))
                    if style in active:
                        out.append(_Piece(inner, entity=False))
                    else:
                        out.extend(_pieces_around(_STYLE_MARKERS[style], inner))
                case Link(href, children):
                    out.append(_Piece(_link(href, inline_text(children)), entity=False))
        return out


def _styled(marker: str, inner: str) -> str:
    return f"{marker}{inner}{marker}" if inner.strip() else inner


def _pieces_around(marker: str, inner: str) -> list[_Piece]:
    """``inner`` between markers; its edge whitespace moves outside (Slack needs that)."""
    core = inner.strip()
    if not core:
        return [_Piece(inner, entity=False)]
    start = inner.index(core[0])
    lead, trail = inner[:start], inner[start + len(core) :]
    pieces = [_Piece(lead, entity=False)] if lead else []
    pieces.append(_Piece(f"{marker}{core}{marker}", entity=True))
    if trail:
        pieces.append(_Piece(trail, entity=False))
    return pieces


def _join(pieces: Sequence[_Piece]) -> str:
    """The pieces' text, with a word joiner where a marker would touch a letter."""
    out: list[str] = []
    for index, piece in enumerate(pieces):
        text = piece.text
        if piece.entity:
            before = out[-1][-1:] if out and out[-1] else ""
            after_piece = pieces[index + 1].text[:1] if index + 1 < len(pieces) else ""
            if text[:1] in _MARKERS and before.isalnum():
                text = WORD_JOINER + text
            if text[-1:] in _MARKERS and after_piece.isalnum():
                text += WORD_JOINER
        out.append(text)
    return "".join(out)


def _link(url: str, label: str) -> str:
    label = label.replace("\n", " ").replace("`", _BACKTICK_LOOKALIKE)
    if not _LINKABLE.match(url):
        return f"{escape(label)} ({escape(url)})" if url and url != label else escape(label)
    # A "|" would end the URL part of <url|text>.
    target = escape(url).replace("|", "%7C")
    if not label or label == url:
        return f"<{target}>"
    return f"<{target}|{escape(label)}>"
