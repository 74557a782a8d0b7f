"""The summary in a session's transcript: where it sits and what it costs, counted once."""

from __future__ import annotations

import uuid

import pytest

from agent_core.compaction.service import build_transcript
from agent_core.context.markers import summary_message
from agent_core.db.models import ChatSession
from agent_core.tokens import TokenCounter

COUNTER = TokenCounter("cl100k_base")


def _row(message_id: int, seq: int, text: str) -> tuple[object, ...]:
    return (message_id, seq, seq, "user", text, None, None, None, "u1", "Ann", 5)


def test_the_summary_is_counted_exactly_and_once_for_every_view_that_carries_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = f"Ann keeps the deploy key in vault path ops/deploy ({uuid.uuid4()})."
    chat_session = ChatSession(
        summary=body, summary_anchor_seq=2, summary_seq=2, chat_type="private"
    )
    rows = [_row(1, 1, "first"), _row(3, 3, "third")]
    counted: list[str] = []
    original = TokenCounter.count_text

    def counting(self: TokenCounter, text: str) -> int:
        counted.append(text)
        return original(self, text)

    expected = COUNTER.count_message(summary_message(body))
    monkeypatch.setattr(TokenCounter, "count_text", counting)
    views = [build_transcript(rows, chat_session, COUNTER) for _ in range(3)]
    for view in views:
        assert view.ids == [1, None, 3], "the summary sits where the archived rows sat"
        assert view.token_counts == [5, expected, 5]
    assert sum(body in text for text in counted) == 1, "one count for the three views"
