"""Split a Markdown reply into Slack messages, each under the limit once converted.

Splitting happens on the Markdown (paragraph, sentence, word; never inside code or an
entity), then each piece is converted. Escaping makes mrkdwn longer than its Markdown
(``&`` becomes ``&amp;``), so a converted piece that is still too long is split again with
a proportionally smaller limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.slack.mrkdwn import to_mrkdwn
from adapters.splitting import split_markdown

MAX_MESSAGE_CHARS = 3_900
"""Slack truncates ``text`` at 40,000 characters but asks for at most 4,000 per message;
like most bots we stay a little under that so long replies read as several messages."""
MIN_SPLIT_CHARS = 16
"""The smallest limit :func:`split_markdown` accepts."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message to post: its Markdown source and the mrkdwn sent to Slack."""

    markdown: str
    mrkdwn: str


def _hard_cut(text: str, limit: int) -> list[str]:
    # Only reached when a piece at the splitter's minimum still expands past the limit
    # (an absurdly small limit); cut between characters, never inside an escape.
    pieces: list[str] = []
    while len(text) > limit:
        cut = limit
        amp = text.rfind("&", max(0, cut - 4), cut)
        if amp != -1 and ";" not in text[amp:cut]:
            cut = amp or limit
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text] if text else pieces


def render_chunks(markdown: str, limit: int = MAX_MESSAGE_CHARS) -> list[Chunk]:
    """The messages for ``markdown``, in order; each ``mrkdwn`` is at most ``limit`` long.

    Raises:
        ValueError: ``limit`` is below :data:`MIN_SPLIT_CHARS`.
    """
    if limit < MIN_SPLIT_CHARS:
        raise ValueError(f"`limit` must be at least {MIN_SPLIT_CHARS} characters")
    chunks: list[Chunk] = []
    pending = split_markdown(markdown.strip(), limit)
    while pending:
        piece = pending.pop(0)
        converted = to_mrkdwn(piece)
        if len(converted) <= limit:
            if converted.strip():
                chunks.append(Chunk(piece, converted))
            continue
        # Shrink in proportion to the growth, and always below the piece, so this ends.
        smaller = min(len(piece) - 1, len(piece) * limit // len(converted))
        if smaller >= MIN_SPLIT_CHARS:
            pending[:0] = split_markdown(piece, smaller)
            continue
        chunks.extend(Chunk(piece, part) for part in _hard_cut(converted, limit))
    return chunks
