"""Render a reply as plain text: what is sent when a platform refuses our formatting.

Nothing of the reply is lost: markup disappears, lists keep their bullets and numbers,
quotes their ``>``, tables their columns, and a link shows its target after its label.
"""

from __future__ import annotations

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
)
from adapters.rendering import Renderer

RULE = "———"


class PlainRenderer(Renderer):
    """Plain text, no markup of any platform."""

    def paragraph(self, inlines: Sequence[Inline]) -> str:
        """The text, links followed by their targets."""
        return self.inlines(inlines).strip()

    def heading(self, block: Heading) -> str:
        """The heading's text on its own line."""
        return self.inlines(block.inlines).strip()

    def code_block(self, block: CodeBlock) -> str:
        """The code, as it is."""
        return block.code

    def quote(self, block: Quote) -> str:
        """Every line behind ``> ``."""
        inner = self.join(block.blocks)
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def rule(self) -> str:
        """A short line of dashes."""
        return RULE

    def inlines(self, nodes: Sequence[Inline]) -> str:
        """Inline content as text."""
        parts: list[str] = []
        for node in nodes:
            match node:
                case Text(text) | CodeSpan(text):
                    parts.append(text)
                case LineBreak():
                    parts.append("\n")
                case Styled(children=children):
                    parts.append(self.inlines(children))
                case Link(href, children):
                    label = self.inlines(children)
                    shown = inline_text(children)
                    parts.append(f"{label} ({href})" if href and href != shown else label)
        return "".join(parts)
