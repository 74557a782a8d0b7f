"""Render a reply as the HTML subset Telegram's ``parse_mode=HTML`` accepts.

The reply is parsed once (:mod:`adapters.document`) and rendered tag by tag, so the result
is always well nested and every ``<``, ``>`` and ``&`` of the text (code included) is
escaped. Telegram has no headings, lists or tables: headings become bold lines, lists
become text with bullets or numbers, tables aligned monospace blocks. Where Telegram
forbids nesting (a quote in a quote, a link or code inside a link) the inner part is
shown as text, and a link Telegram cannot open shows its target after its label.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from adapters.document import (
    CodeBlock,
    CodeSpan,
    Heading,
    Inline,
    LineBreak,
    Link,
    Quote,
    Styled,
    Text,
    inline_text,
    parse,
)
from adapters.rendering import Renderer

RULE = "———"
LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
"""Link targets Telegram accepts in ``<a href>``; others are shown next to the text."""
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,32}$")
_TAGS = {"strong": "b", "em": "i", "strike": "s"}
_TAG = re.compile(r"<[^>]*>")


def escape(text: str) -> str:
    """Escape text for Telegram HTML (``&``, ``<`` and ``>``; quotes are fine in text)."""
    return html.escape(text, quote=False)


def markdown_to_html(markdown: str) -> str:
    """Telegram HTML for ``markdown``; empty when the Markdown renders to nothing."""
    return TelegramRenderer().document(parse(markdown))


def visible_text(markup: str) -> str:
    """The text Telegram shows for our HTML (what its 4,096 limit counts)."""
    return html.unescape(_TAG.sub("", markup))


class TelegramRenderer(Renderer):
    """Telegram HTML; quotes are never nested, as Telegram refuses that."""

    def __init__(self) -> None:
        self._in_quote = False

    def paragraph(self, inlines: Sequence[Inline]) -> str:
        """Inline HTML."""
        return self.inlines(inlines).strip()

    def heading(self, block: Heading) -> str:
        """A bold line."""
        return f"<b>{self.inlines(block.inlines, bold=True).strip()}</b>"

    def code_block(self, block: CodeBlock) -> str:
        """``<pre>``, with ``<code class="language-…">`` when the language is a plain name."""
        code = escape(block.code)
        if _LANGUAGE.match(block.language):
            return f'<pre><code class="language-{block.language}">{code}</code></pre>'
        return f"<pre>{code}</pre>"

    def quote(self, block: Quote) -> str:
        """``<blockquote>``; a quote inside a quote joins it."""
        if self._in_quote:
            return self.join(block.blocks)
        self._in_quote = True
        try:
            inner = self.join(block.blocks)
        finally:
            self._in_quote = False
        return f"<blockquote>{inner}</blockquote>" if inner else ""

    def rule(self) -> str:
        """A short line of dashes."""
        return RULE

    def inlines(self, nodes: Sequence[Inline], *, bold: bool = False, in_link: bool = False) -> str:
        """Inline HTML; ``bold`` and ``in_link`` say what already surrounds it."""
        return "".join(self.inline(node, bold=bold, in_link=in_link) for node in nodes)

    def inline(self, node: Inline, *, bold: bool, in_link: bool) -> str:
        """One inline element."""
        match node:
            case Text(text):
                return escape(text)
            case LineBreak():
                return "\n"
            case CodeSpan(text):
                # Telegram lets no other entity contain code, a link included.
                return escape(text) if in_link else f"<code>{escape(text)}</code>"
            case Styled(style, children):
                inner = self.inlines(children, bold=bold or style == "strong", in_link=in_link)
                if style == "strong" and bold:
                    return inner
                tag = _TAGS[style]
                return f"<{tag}>{inner}</{tag}>"
            case Link(href, children):
                label = self.inlines(children, bold=bold, in_link=True)
                shown = inline_text(children)
                if in_link or not href.lower().startswith(LINK_SCHEMES):
                    return f"{label} ({escape(href)})" if href and href != shown else label
                return f'<a href="{html.escape(href, quote=True)}">{label}</a>'
        raise TypeError(node)
