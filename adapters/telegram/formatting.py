"""Convert a Markdown reply into the HTML subset Telegram's ``parse_mode=HTML`` accepts.

The Markdown is parsed by markdown-it (CommonMark plus strikethrough and tables) into a
tree and rendered tag by tag, so the result is always well nested and every ``<``, ``>``
and ``&`` of the text is escaped. Telegram has no headings, lists or tables: headings
become bold lines, lists become text with bullets or numbers, tables become aligned
monospace blocks. Raw HTML in the Markdown is shown as text, never interpreted.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

BULLET = "•"
RULE = "———"
LIST_INDENT = "   "
LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
"""Link targets Telegram accepts in ``<a href>``; others are shown next to the text."""
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,32}$")

_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}


def escape(text: str) -> str:
    """Escape text for Telegram HTML (``&``, ``<`` and ``>``; quotes are fine in text)."""
    return html.escape(text, quote=False)


def _escape_attribute(value: str) -> str:
    return html.escape(value, quote=True)


def markdown_to_html(markdown: str) -> str:
    """Telegram HTML for ``markdown``; empty when the Markdown renders to nothing."""
    root = SyntaxTreeNode(_PARSER.parse(markdown))
    return _Renderer().blocks(root.children).strip()


class _Renderer:
    """Renders one document; tracks where Telegram forbids nesting."""

    def __init__(self) -> None:
        self._in_quote = False
        self._in_link = False

    # Blocks -----------------------------------------------------------------------------

    def blocks(self, nodes: Iterable[SyntaxTreeNode], separator: str = "\n\n") -> str:
        rendered = (self.block(node) for node in nodes)
        return separator.join(part for part in rendered if part)

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inline_children(node)
        if kind == "heading":
            text = self.inline_children(node)
            return f"<b>{text}</b>" if text else ""
        if kind in ("fence", "code_block"):
            return self.code_block(node)
        if kind == "blockquote":
            return self.blockquote(node)
        if kind in ("bullet_list", "ordered_list"):
            return self.list_(node, depth=0)
        if kind == "table":
            return self.table(node)
        if kind == "hr":
            return RULE
        # html_block (off in the parser) and anything unexpected: show the source as text.
        return escape(node.content.rstrip("\n"))

    def code_block(self, node: SyntaxTreeNode) -> str:
        code = escape(node.content.rstrip("\n"))
        if not code:
            return ""
        language = node.info.split()[0] if node.info.strip() else ""
        if language and _LANGUAGE.match(language):
            return f'<pre><code class="language-{language}">{code}</code></pre>'
        return f"<pre>{code}</pre>"

    def blockquote(self, node: SyntaxTreeNode) -> str:
        if self._in_quote:
            # Telegram refuses nested quotes; the inner one joins the outer.
            return self.blocks(node.children, "\n")
        self._in_quote = True
        try:
            inner = self.blocks(node.children, "\n")
        finally:
            self._in_quote = False
        return f"<blockquote>{inner}</blockquote>" if inner else ""

    def list_(self, node: SyntaxTreeNode, depth: int) -> str:
        ordered = node.type == "ordered_list"
        number = int(node.attrs.get("start", 1) or 1) if ordered else 0
        tight = all(
            child.hidden
            for item in node.children
            for child in item.children
            if child.type == "paragraph"
        )
        lines: list[str] = []
        for item in node.children:
            marker = f"{number}." if ordered else BULLET
            number += 1
            lines.append(self.list_item(item, marker, depth))
        return ("\n" if tight else "\n\n").join(line for line in lines if line)

    def list_item(self, item: SyntaxTreeNode, marker: str, depth: int) -> str:
        parts: list[str] = []
        for child in item.children:
            if child.type in ("bullet_list", "ordered_list"):
                parts.append(self.list_(child, depth + 1))
            else:
                parts.append(self.block(child))
        body = "\n".join(part for part in parts if part)
        return f"{LIST_INDENT * depth}{marker} {body}"

    def table(self, node: SyntaxTreeNode) -> str:
        rows: list[list[str]] = []
        for section in node.children:
            for row in section.children:
                rows.append([_plain_text(cell) for cell in row.children])
        if not rows:
            return ""
        widths = [
            max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(rows[0]))
        ]
        lines = [
            " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
        ]
        if len(rows) > 1:
            lines.insert(1, "-+-".join("-" * width for width in widths))
        return f"<pre>{escape(chr(10).join(lines))}</pre>"

    # Inline -----------------------------------------------------------------------------

    def inline_children(self, node: SyntaxTreeNode) -> str:
        return "".join(self.inline(child) for child in node.children).strip()

    def inline(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "inline":
            return "".join(self.inline(child) for child in node.children)
        if kind == "text":
            return escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return f"<code>{escape(node.content)}</code>" if node.content else ""
        if kind in _INLINE_TAGS:
            inner = "".join(self.inline(child) for child in node.children)
            tag = _INLINE_TAGS[kind]
            return f"<{tag}>{inner}</{tag}>" if inner else ""
        if kind == "link":
            return self.link(str(node.attrs.get("href", "")), node.children)
        if kind == "image":
            alt = _plain_text(node) or "image"
            return self.link(str(node.attrs.get("src", "")), (), label=escape(alt))
        # html_inline (off in the parser) and anything unexpected: the source, as text.
        return escape(node.content)

    def link(self, href: str, children: Iterable[SyntaxTreeNode], label: str | None = None) -> str:
        if label is None:
            outer, self._in_link = self._in_link, True
            try:
                label = "".join(self.inline(child) for child in children)
            finally:
                self._in_link = outer
        if self._in_link or not href.lower().startswith(LINK_SCHEMES):
            return f"{label} ({escape(href)})" if href and href != label else label
        return f'<a href="{_escape_attribute(href)}">{label or escape(href)}</a>'


def _plain_text(node: SyntaxTreeNode) -> str:
    """The visible text under ``node``, without markup (for table cells and image alt)."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain_text(child) for child in node.children)
