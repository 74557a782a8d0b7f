"""Coalesce a growing reply into draft calls: which message to post or edit, and when.

Pure logic, no I/O (the streamer in :mod:`workers.streaming` makes the calls). The rules:

- At most one call (post or edit) per ``interval`` seconds for the whole reply, so a
  reply never makes more than one call per interval to any of its messages; the first
  post goes out at once (time to first visible text).
- Only whole words are shown: the text is cut after its last whitespace.
- No message ever exceeds ``limit`` (as ``measure`` counts): a reply that outgrows one
  message continues in the next, cut at a line break or space (:func:`split_text`).
- Never a call that changes nothing, and never an empty message.

Drafts are plain text: Markdown is shown as written until the final delivery renders it
(an unclosed code fence in the partial text cannot break anything). The final formatted
text is not the coalescer's business: the delivery edits it in, exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from adapters.splitting import split_text


class DraftAction(StrEnum):
    """What a draft call does."""

    POST = "post"
    EDIT = "edit"


@dataclass(frozen=True, slots=True)
class DraftCall:
    """One platform call to make now."""

    action: DraftAction
    part: int
    """Which message of the reply (0 is the first)."""
    text: str


def whole_words(text: str) -> str:
    """``text`` up to its last complete word (a word is complete once whitespace follows)."""
    if not text or text[-1].isspace():
        return text.strip()
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return text[:cut].strip() if cut > 0 else ""


class DraftCoalescer:
    """Decides the next draft call of one streamed reply.

    Args:
        interval: seconds between calls.
        limit: most a message may hold, by ``measure``.
        measure: the platform's length of a text (Telegram counts UTF-16 units).
        posted: how many messages an earlier run of the turn already posted (their text
            is unknown, so the first edit of each goes out even if it changes nothing).

    Raises:
        ValueError: ``interval`` is negative or ``limit`` under 1.
    """

    def __init__(
        self,
        *,
        interval: float,
        limit: int,
        measure: Callable[[str], int] = len,
        posted: int = 0,
    ) -> None:
        if interval < 0:
            raise ValueError("`interval` must not be negative")
        if limit < 1:
            raise ValueError("`limit` must be at least 1")
        self.interval = interval
        self.limit = limit
        self._measure = measure
        self.shown: list[str | None] = [None] * posted
        """What each message of the reply shows (``None``: unknown)."""
        self._next_at = -math.inf
        """No draft call before this: the interval, or a hold."""
        self._interval_ends = -math.inf
        """The interval since the last call that went out ends here."""

    def parts(self, text: str) -> list[str]:
        """The messages ``text`` shows as: whole words, each within the limit."""
        return split_text(whole_words(text), self.limit, self._measure)

    def next_call(self, text: str, now: float) -> DraftCall | None:
        """The call to make now for the reply's text so far, or ``None`` (wait, or nothing new).

        Earlier messages are brought up to date before a later one is posted.
        """
        if now < self._next_at:
            return None
        for index, part in enumerate(self.parts(text)):
            if index >= len(self.shown):
                return DraftCall(DraftAction.POST, index, part)
            if self.shown[index] != part:
                return DraftCall(DraftAction.EDIT, index, part)
        return None

    def done(self, call: DraftCall, now: float) -> None:
        """``call`` succeeded at ``now``: its message shows its text; the interval starts."""
        if call.action is DraftAction.POST:
            self.shown.append(call.text)
        else:
            self.shown[call.part] = call.text
        self._interval_ends = now + self.interval
        self._next_at = max(self._next_at, self._interval_ends)

    def wait_seconds(self, now: float) -> float:
        """How long until the interval since the last call that went out is over.

        The final edit waits this out too, and only this: a :meth:`hold` keeps back drafts
        alone. A draft held because its share of a limit is spent (or the platform said
        429) must not hold back the final text: the final delivery takes its own slot from
        the bot's pacer, which knows every 429 and leaves finals the part of each limit
        drafts may not use.
        """
        return max(0.0, self._interval_ends - now)

    def hold(self, seconds: float, now: float) -> None:
        """Make no draft call for ``seconds`` (the platform or the pacer asked us to wait)."""
        self._next_at = max(self._next_at, now + seconds)
