"""The per-turn transcript: stored rows read back as the chat messages the model sees."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.service import build_transcript
from agent_core.context.markers import summary_message
from agent_core.db.engine import transaction
from agent_core.db.models import Message, MessageKind, TurnState
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import (
    GROUP,
    Conversation,
    IncomingMessage,
    record_incoming,
    record_reply,
)
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter

pytestmark = pytest.mark.integration

COUNTER = TokenCounter("cl100k_base")


def test_group_thread_with_tools_and_summary_reads_back_in_order(
    factory: sessionmaker[Session],
) -> None:
    with transaction(factory) as db:
        bot = TenancyRepository(db).ensure_bot("default", "telegram", "default", settings={})
        chat = Conversation("default", bot.id, "telegram", "-100", chat_type=GROUP)
        first = record_incoming(
            db, IncomingMessage(chat, "who broke the build?", "1", "u1", "Alice"), COUNTER
        )
        repo = SessionRepository.from_session(db)
        session = repo.get(first.session_id)
        assert session is not None
        trigger = db.get(Message, first.message_id)
        assert trigger is not None
        record_reply(db, session, trigger, "Let me check the CI log.", counter=COUNTER)
        seq = repo.allocate_seq(session.id).seq
        db.add_all(
            [
                Message(
                    session_id=session.id,
                    bot_id=bot.id,
                    seq=seq,
                    anchor_seq=trigger.anchor_seq,
                    role="assistant",
                    kind=MessageKind.CHAT,
                    tool_calls=[
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "ci_log", "arguments": "{}"},
                        }
                    ],
                    turn_state=TurnState.NONE,
                    token_count=7,
                    meta={},
                ),
                Message(
                    session_id=session.id,
                    bot_id=bot.id,
                    seq=repo.allocate_seq(session.id).seq,
                    anchor_seq=trigger.anchor_seq,
                    role="tool",
                    kind=MessageKind.CHAT,
                    content="job 42 failed",
                    tool_call_id="call_1",
                    name="ci_log",
                    turn_state=TurnState.NONE,
                    token_count=5,
                    meta={},
                ),
            ]
        )
        db.flush()
        later = record_incoming(db, IncomingMessage(chat, "thanks", "2", "u2", None), COUNTER)
        later_message = repo.get_message(later.message_id)
        assert later_message is not None
        # A summary placed just before the last message (as if the middle was compacted).
        session.summary = "Alice asked about the build."
        session.summary_anchor_seq = session.summary_seq = later_message.anchor_seq
        session_id = session.id

    with transaction(factory) as db:
        session = SessionRepository.from_session(db).get(session_id)
        assert session is not None
        rows = SessionRepository.from_session(db).context_rows(session_id)
        transcript = build_transcript(rows, session, COUNTER)

    assert transcript.messages == [
        {"role": "user", "content": "[Alice] who broke the build?"},
        {"role": "assistant", "content": "Let me check the CI log."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ci_log", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "job 42 failed", "tool_call_id": "call_1", "name": "ci_log"},
        summary_message("Alice asked about the build."),
        {"role": "user", "content": "[u2] thanks"},
    ]
    assert transcript.ids[:4] == [int(row[0]) for row in rows[:4]]
    assert transcript.ids[4] is None
    assert transcript.token_counts[2:4] == [7, 5]
