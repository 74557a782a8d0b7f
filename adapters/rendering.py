"""The skeleton every platform renderer fills in: blocks in order, lists, and the spacing.

A renderer turns a parsed document (:mod:`adapters.document`) into one platform's markup.
The shared parts live here: blocks keep the blank lines (or their absence) the author
wrote, list items get their bullets or numbers and nested lists their indentation. Each
platform says how a paragraph, heading, code block, quote and rule look, and how its
inline markup is written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from adapters.document import (
    Block,
    CodeBlock,
    Heading,
    Inline,
    ListBlock,
    ListItem,
    Paragraph,
    Quote,
    Rule,
)

BULLET = "•"


class Renderer(ABC):
    """Renders whole documents; subclasses render the elements."""

    list_indent = "   "
    """How far a nested list moves right (when the platform has no list syntax)."""

    def document(self, blocks: Sequence[Block]) -> str:
        """The markup for ``blocks``, as one message."""
        return self.join(blocks)

    def join(self, blocks: Sequence[Block]) -> str:
        """Blocks one after the other: a blank line between them where the author left one."""
        out: list[str] = []
        for block in blocks:
            rendered = self.block(block)
            if not rendered:
                continue
            if out:
                out.append("\n\n" if block.gap else "\n")
            out.append(rendered)
        return "".join(out)

    def block(self, block: Block) -> str:
        """One block's markup; empty when it shows nothing."""
        match block:
            case Paragraph(inlines=inlines):
                return self.paragraph(inlines)
            case Heading():
                return self.heading(block)
            case CodeBlock():
                return self.code_block(block)
            case Quote():
                return self.quote(block)
            case ListBlock():
                return self.list_block(block, indent="")
            case Rule():
                return self.rule()
        raise TypeError(block)

    @abstractmethod
    def paragraph(self, inlines: Sequence[Inline]) -> str:
        """A paragraph."""

    @abstractmethod
    def heading(self, block: Heading) -> str:
        """A heading."""

    @abstractmethod
    def code_block(self, block: CodeBlock) -> str:
        """A code block."""

    @abstractmethod
    def quote(self, block: Quote) -> str:
        """A block quote."""

    @abstractmethod
    def rule(self) -> str:
        """A horizontal rule."""

    def list_marker(self, ordered: bool, number: int) -> str:
        """The bullet or number in front of an item."""
        return f"{number}." if ordered else BULLET

    def nested_indent(self, marker: str) -> str:
        """What a list nested in an item with ``marker`` is indented by."""
        return self.list_indent

    def list_block(self, block: ListBlock, indent: str) -> str:
        """A list whose items start at ``indent``."""
        items: list[str] = []
        for number, item in enumerate(block.items, start=block.start):
            rendered = self.list_item(item, self.list_marker(block.ordered, number), indent)
            if rendered:
                items.append(rendered)
        return ("\n" if block.tight else "\n\n").join(items)

    def list_item(self, item: ListItem, marker: str, indent: str) -> str:
        """One item: its marker (none when it continues a cut item), then its blocks."""
        parts: list[str] = []
        nested = indent + self.nested_indent(marker)
        for child in item.blocks:
            if isinstance(child, ListBlock):
                rendered = self.list_block(child, nested)
            else:
                rendered = self.block(child)
            if not rendered:
                continue
            if parts:
                parts.append("\n\n" if child.gap else "\n")
            parts.append(rendered)
        body = "".join(parts)
        if item.blocks and isinstance(item.blocks[0], ListBlock):
            # The nested list brings its own indent; only the marker goes in front of it.
            return body if item.continued else f"{indent}{marker} {body.lstrip()}"
        lead = "" if item.continued else f"{marker} "
        return f"{indent}{lead}{body}".rstrip()
