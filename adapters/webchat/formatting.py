"""Assistant replies as HTML for the web chat page: Markdown rendered so it is safe to insert.

markdown-it with raw HTML off (``<script>`` stays visible text), images off (no request to
a host the model named), and links only to ``http``, ``https`` and ``mailto`` addresses; any
other link (``javascript:``, ``data:``, relative) stays its Markdown text. Links open in a
new tab and carry no referrer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"


def _safe_link(url: str) -> bool:
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return False
    return scheme in SAFE_SCHEMES


def _link_open(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: dict[str, Any],
) -> str:
    tokens[idx].attrSet("rel", LINK_REL)
    tokens[idx].attrSet("target", "_blank")
    return renderer.renderToken(tokens, idx, options, env)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
    md.disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


_PARSER = _parser()


def to_html(markdown: str) -> str:
    """The reply as an HTML fragment to insert into the page."""
    html: str = _PARSER.render(markdown)
    return html
