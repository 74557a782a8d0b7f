"""A session view is one consistent read, even when a compaction commits between its reads."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import ChatSession, Message
from agent_core.sessions.view import load_view
from agent_core.tokens import TokenCounter
from tests.integration.tools.helpers import make_chat

COUNTER = TokenCounter("cl100k_base")


def test_a_compaction_committed_after_the_session_row_was_read_is_seen_whole(
    factory: sessionmaker[Session],
) -> None:
    """Postgres reads each statement afresh: the session row a turn began on can predate
    a compaction whose archived rows the transcript read no longer returns. The view must
    then be the compaction's (its summary), never the old summary without those rows."""
    chat = make_chat(factory, "c1")
    first = chat.say("the deploy key lives in vault path ops/deploy", answer="Noted")
    chat.say("and the build runs on host7")
    session_id = chat.session().id
    with read_transaction(factory) as db:
        chat_session = db.get(ChatSession, session_id)  # the turn's start
        assert chat_session is not None
        with transaction(factory) as other:  # a compaction commits meanwhile
            other.execute(update(Message).where(Message.id == first).values(archived=True))
            other.execute(
                update(ChatSession)
                .where(ChatSession.id == session_id)
                .values(
                    summary="Ann keeps the deploy key in vault path ops/deploy.",
                    summary_version=ChatSession.summary_version + 1,
                )
            )
        view = load_view(db, session_id, COUNTER, up_to_anchor=None)
    assert view is not None
    text = "\n".join(str(m.get("content")) for m in view.transcript.messages)
    compacted = first not in view.transcript.ids
    assert compacted == (view.summary_version == 1), "rows and summary of one moment"
    assert "ops/deploy" in text, "nothing said is lost either way"
    if factory.kw["bind"].dialect.name == "postgresql":
        assert compacted, "the committed compaction is what the turn sees"
    # SQLite's read transaction is one snapshot: it sees the session as it began.
