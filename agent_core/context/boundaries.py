"""Phase 2: where the protected head ends and the protected tail begins.

The head is the system prompt plus the first few messages (the original task), until a
summary exists; then it decays to the system prompt alone, or early turns would be
copied into every later compaction forever. The tail is chosen by token budget, with a
minimum message count, and moved earlier until no tool call is separated from its results
and the latest user message and the latest visible assistant reply are inside it — as far
as the tail's soft ceiling allows. An anchor further back (in a busy group, the bot's last
answer may be thousands of messages ago) is *pinned* instead: kept verbatim right after
the summary while everything around it is summarised, so one old reply can never make a
thread impossible to compact. The boundaries only ever grow the protected regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.context.markers import is_summary_message
from agent_core.context.transcript import Message, is_tool_result, is_visible_reply

MIN_TAIL_MESSAGES = 3
MAX_TAIL_MESSAGE_FLOOR = 8
"""The message floor is capped so a run of bulky tool outputs is not kept wholesale."""
TAIL_SOFT_CEILING = 1.5
"""The tail may overshoot its token budget up to this factor to keep a straddling message."""


@dataclass(frozen=True, slots=True)
class Boundaries:
    """The protected head ``[0, head_end)``, tail ``[tail_start, n)`` and pinned anchors."""

    head_end: int
    tail_start: int
    pinned: tuple[int, ...] = ()
    """Anchors between head and tail kept verbatim (after the summary), in order."""

    @property
    def middle(self) -> tuple[int, ...]:
        """The indices a compaction summarises."""
        pinned = set(self.pinned)
        return tuple(i for i in range(self.head_end, self.tail_start) if i not in pinned)


def minimum_tail_messages(protect_last_n: int) -> int:
    """How many messages the tail always keeps: ``max(3, min(protect_last_n, 8))``."""
    return max(MIN_TAIL_MESSAGES, min(protect_last_n, MAX_TAIL_MESSAGE_FLOOR))


def tool_result_parents(messages: Sequence[Message]) -> dict[int, int]:
    """Tool result index -> index of the assistant message that made the call."""
    caller_of: dict[str, int] = {}
    parents: dict[int, int] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                if call.get("id"):
                    caller_of[str(call["id"])] = index
        elif is_tool_result(message):
            parent = caller_of.get(str(message.get("tool_call_id") or ""))
            if parent is not None:
                parents[index] = parent
    return parents


def head_end(
    messages: Sequence[Message],
    protect_first_n: int,
    *,
    decayed: bool,
    parents: dict[int, int] | None = None,
) -> int:
    """The end of the protected head.

    Args:
        messages: the transcript.
        protect_first_n: non-system messages protected before the first compaction.
        decayed: a summary exists (or a compaction ran): protect the system prompt only.
        parents: :func:`tool_result_parents` of ``messages``, when already computed.
    """
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    if not decayed:
        end = min(len(messages), end + max(0, protect_first_n))
    parents = tool_result_parents(messages) if parents is None else parents
    # A call in the head keeps its results in the head (which may pull in further calls).
    while True:
        extended = max(end, max((r + 1 for r, p in parents.items() if p < end), default=0))
        if extended == end:
            return end
        end = extended


def tail_start_by_tokens(
    tokens: Sequence[int],
    head: int,
    budget_tokens: int,
    min_messages: int,
    max_messages: int | None = None,
) -> int:
    """Walk back from the end while the tail fits ``budget_tokens``.

    The first ``min_messages`` messages are always taken and at most ``max_messages``
    are. A message that crosses the budget is still taken when the tail stays within
    :data:`TAIL_SOFT_CEILING` times the budget, and the walk ends there.
    """
    ceiling = budget_tokens * TAIL_SOFT_CEILING
    cut = len(tokens)
    total = 0
    for index in range(len(tokens) - 1, head - 1, -1):
        size = tokens[index]
        taken = len(tokens) - cut
        if max_messages is not None and taken >= max(max_messages, min_messages):
            break
        if taken < min_messages or total + size <= budget_tokens:
            total += size
            cut = index
            continue
        if total + size <= ceiling:
            cut = index
        break
    return cut


def align_to_tool_groups(cut: int, parents: dict[int, int], length: int) -> int:
    """Move ``cut`` earlier until no tool result at or after it answers a call before it."""
    earliest_parent = [length] * (length + 1)  # min parent of the results at i or later
    for index in range(length - 1, -1, -1):
        earliest_parent[index] = min(earliest_parent[index + 1], parents.get(index, length))
    while earliest_parent[cut] < cut:
        cut = earliest_parent[cut]
    return cut


def _latest(messages: Sequence[Message], role: str, *, visible: bool) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != role or is_summary_message(message):
            continue
        if not visible or is_visible_reply(message):
            return index
    return None


def keep_anchors_in_tail(
    messages: Sequence[Message],
    cut: int,
    *,
    tokens: Sequence[int] | None = None,
    ceiling_tokens: float | None = None,
    max_messages: int | None = None,
) -> tuple[int, tuple[int, ...]]:
    """Keep the latest user message and the latest visible reply out of the summary.

    The latest user message is the active task; the latest visible reply is what people
    last saw the bot say. Neither may disappear into a summary. An anchor is taken into
    the tail when the tail then still fits ``ceiling_tokens`` and ``max_messages`` (no
    limit when they are ``None``); otherwise it is pinned. An anchor that carries tool
    calls is always taken into the tail, since its results must follow it.

    Returns:
        The new cut and the pinned anchor indices, in order.
    """
    suffix = [0] * (len(messages) + 1)
    if tokens is not None:
        for index in range(len(messages) - 1, -1, -1):
            suffix[index] = suffix[index + 1] + tokens[index]
    anchors = sorted(
        {
            anchor
            for anchor in (
                _latest(messages, "user", visible=False),
                _latest(messages, "assistant", visible=True),
            )
            if anchor is not None
        },
        reverse=True,
    )
    pinned: list[int] = []
    for anchor in anchors:
        if anchor >= cut:
            continue
        fits = (ceiling_tokens is None or suffix[anchor] <= ceiling_tokens) and (
            max_messages is None or len(messages) - anchor <= max_messages
        )
        if fits or messages[anchor].get("tool_calls"):
            cut = anchor
        else:
            pinned.append(anchor)
    return cut, tuple(sorted(p for p in pinned if p < cut))


def find_boundaries(
    messages: Sequence[Message],
    tokens: Sequence[int],
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_budget_tokens: int,
    decayed: bool,
    max_tail_messages: int | None = None,
) -> Boundaries:
    """The head and tail of ``messages``; an empty middle means nothing can be compacted.

    Args:
        messages: the transcript.
        tokens: per-message token sizes, aligned with ``messages``.
        protect_first_n: non-system messages the head protects before the first compaction.
        protect_last_n: the configured tail size; the floor is derived from it.
        tail_budget_tokens: the tail's token budget (threshold x target ratio).
        decayed: a summary exists or a compaction ran, so the head is the system prompt only.
        max_tail_messages: the most messages the budget walk may take (the anchors and tool
            groups may still add some).
    """
    parents = tool_result_parents(messages)
    head = head_end(messages, protect_first_n, decayed=decayed, parents=parents)
    if head >= len(messages):
        return Boundaries(len(messages), len(messages))
    cut = tail_start_by_tokens(
        tokens, head, tail_budget_tokens, minimum_tail_messages(protect_last_n), max_tail_messages
    )
    cut = align_to_tool_groups(cut, parents, len(messages))
    cut, pinned = keep_anchors_in_tail(
        messages,
        cut,
        tokens=tokens,
        ceiling_tokens=tail_budget_tokens * TAIL_SOFT_CEILING,
        max_messages=max_tail_messages,
    )
    cut = align_to_tool_groups(cut, parents, len(messages))
    if cut <= head:
        return Boundaries(head, head)
    return Boundaries(head, cut, tuple(p for p in pinned if head <= p < cut))
