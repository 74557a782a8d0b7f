"""The prompt a reply uses while another process is compacting its session.

A flood of group messages keeps background compaction busy; a question that arrives the
moment the flood ends finds a session over the compressor threshold and a compaction of
it still running. Answering on the whole transcript makes the model read everything that
compaction is about to fold into a summary (the reply took 2.4 times an ordinary turn in
``bench/long_thread.py --quiet 0``); waiting for the compaction holds the reply up. So the
reply reads what that compaction will leave, without its new summary: the head, the
latest summary, the anchors the compressor pins and the tail it keeps. Nothing is stored
or changed: the skipped middle stays in the session and reaches the next turn through the
summary the running compaction writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_core.config import CompressionSettings
from agent_core.context.boundaries import find_boundaries
from agent_core.context.compressor import TAIL_SHARE_OF_MESSAGE_LIMIT
from agent_core.context.markers import is_summary_message


def interim_transcript(
    messages: Sequence[dict[str, Any]],
    tokens: Sequence[int],
    *,
    settings: CompressionSettings,
    threshold_tokens: int,
) -> list[int] | None:
    """Positions of ``messages`` the reply sends while a compaction runs, in order.

    ``None`` when the compressor would keep everything (there is no middle to skip).
    """
    boundaries = find_boundaries(
        messages,
        tokens,
        protect_first_n=settings.protect_first_n,
        protect_last_n=settings.protect_last_n,
        tail_budget_tokens=int(threshold_tokens * settings.target_ratio),
        decayed=True,
        max_tail_messages=int(settings.hard_message_limit * TAIL_SHARE_OF_MESSAGE_LIMIT),
    )
    middle = boundaries.middle
    if not middle:
        return None
    skipped = {i for i in middle if not is_summary_message(messages[i])}
    return [i for i in range(len(messages)) if i not in skipped]
