"""Cut a reply into Slack messages, each under the limit once converted to mrkdwn.

The cuts come from :func:`adapters.splitting.split_document` and are measured on what is
posted: the mrkdwn, and the escaped plain text sent instead if Slack refuses it. Each
message is rendered on its own, so its markup is balanced and a code block cut across
messages is a whole code block in each.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.document import Block, parse
from adapters.plaintext import PlainRenderer
from adapters.slack.mrkdwn import SlackRenderer, escape
from adapters.splitting import split_document, split_text

MAX_MESSAGE_CHARS = 3_900
"""Slack truncates ``text`` at 40,000 characters but asks for at most 4,000 per message;
like most bots we stay a little under that so long replies read as several messages."""
MIN_SPLIT_CHARS = 16
"""The smallest limit accepted: room for some text inside any markup."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message to post: its plain text and the mrkdwn sent to Slack."""

    plain: str
    """The message without markup, posted (escaped) when Slack refuses the mrkdwn."""
    mrkdwn: str


def render_chunks(markdown: str, limit: int = MAX_MESSAGE_CHARS) -> list[Chunk]:
    """The messages for ``markdown``, in order; each ``mrkdwn`` is at most ``limit`` long.

    A reply whose Markdown shows nothing (only link definitions, say) is posted as its
    source text rather than dropped.

    Raises:
        ValueError: ``limit`` is below :data:`MIN_SPLIT_CHARS`.
    """
    if limit < MIN_SPLIT_CHARS:
        raise ValueError(f"`limit` must be at least {MIN_SPLIT_CHARS} characters")
    chunks = [
        Chunk(plain=PlainRenderer().document(part), mrkdwn=SlackRenderer().document(part))
        for part in split_document(parse(markdown), _measure, limit)
    ]
    chunks = [chunk for chunk in chunks if chunk.mrkdwn.strip()]
    if chunks or not markdown.strip():
        return chunks
    pieces = split_text(markdown, limit, lambda text: len(escape(text)))
    return [Chunk(plain=piece, mrkdwn=escape(piece)) for piece in pieces]


def _measure(block: Block) -> tuple[int, int]:
    return len(SlackRenderer().block(block)), len(escape(PlainRenderer().block(block)))
