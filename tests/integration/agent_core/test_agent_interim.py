"""A reply while another process compacts its session: the interim prompt, at library level.

Real SQLite and Postgres, scripted models; "another process" is a compaction lease held
under another owner, as a background compaction on another worker holds it.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from agent_core.agent import TurnEnd
from agent_core.compaction.runner import CompactionReport, RunStatus
from agent_core.compaction.triggers import Trigger
from agent_core.db.engine import transaction
from agent_core.db.models import Message
from agent_core.sessions import lock
from tests.integration.agent_core.test_agent import COUNTER, PAST_THRESHOLD, Harness

pytestmark = pytest.mark.integration

THRESHOLD = 64_000
"""The compressor threshold of the harness's 128k window."""


def _compacting_elsewhere(h: Harness) -> None:
    assert lock.acquire(h.factory, h.session_id, lock.COMPACTION, "other-worker:1", 300)


def _active(h: Harness) -> int:
    query = select(func.count(Message.id)).where(
        Message.session_id == h.session_id, Message.archived.is_(False)
    )
    with transaction(h.factory) as db:
        return db.execute(query).scalar_one()


def test_over_the_threshold_while_compacting_elsewhere_the_reply_reads_the_tail(
    factory: sessionmaker[Session],
) -> None:
    h = Harness(factory, replies=["here is the answer"], compression_hygiene_threshold=0.99)
    h.chatter(PAST_THRESHOLD, words=150)
    question = h.say("what did we decide overnight?")
    _compacting_elsewhere(h)
    stored_before = _active(h)
    outcome, _, _ = h.turn(question)
    assert outcome.end is TurnEnd.REPLY
    assert outcome.text == "here is the answer"
    assert all(r.status is RunStatus.BUSY for r in outcome.compactions), "never waited"
    (call,) = h.main.calls
    sent = call.messages
    assert sent[0]["role"] == "system", "the frozen system prompt, unchanged"
    assert sent[0]["content"] == h.session().system_prompt
    assert sent[-1]["content"] == "what did we decide overnight?"
    assert len(sent) < PAST_THRESHOLD // 2, "the middle being summarised is not sent"
    assert COUNTER.count_messages(sent) < THRESHOLD // 2
    assert sent[-2]["content"].startswith(f"line {PAST_THRESHOLD - 1}:"), "the newest kept"
    assert h.session().compaction_count == 0
    assert _active(h) == stored_before + 1, "nothing archived or dropped: only the reply added"
    assert outcome.counted_tokens < THRESHOLD // 2, "calibration judges what was sent"


def test_below_the_threshold_the_whole_transcript_is_sent_even_while_compacting(
    factory: sessionmaker[Session],
) -> None:
    h = Harness(factory, replies=["fine"], compression_hygiene_threshold=0.99)
    h.chatter(40, words=150)
    question = h.say("and now?")
    _compacting_elsewhere(h)
    h.turn(question)
    (call,) = h.main.calls
    assert len(call.messages) == 1 + 40 + 1


def test_over_the_threshold_with_nobody_compacting_the_reply_path_compacts(
    factory: sessionmaker[Session],
) -> None:
    h = Harness(factory, replies=["compacted first"], compression_hygiene_threshold=0.99)
    h.chatter(PAST_THRESHOLD, words=150)
    outcome, _, _ = h.turn(h.say("summarise please"))
    assert [r.applied for r in outcome.compactions] == [True]
    assert h.session().compaction_count == 1


def test_a_compaction_that_ended_without_bringing_the_session_under_compacts_on_the_reply_path(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preflight found another process compacting; by the call that one had ended, and the
    session is still over the threshold (it failed, or more arrived while it ran): nobody
    is compacting now, so the reply compacts rather than send everything."""
    h = Harness(factory, replies=["compacted after all"], compression_hygiene_threshold=0.99)
    h.chatter(PAST_THRESHOLD, words=150)
    question = h.say("what did we decide overnight?")
    compactor = h.services.compactor
    run = compactor.run
    elsewhere: list[Trigger] = []

    def busy_at_preflight(session_id: str, trigger: Trigger, **options: Any) -> CompactionReport:
        if trigger is Trigger.PREFLIGHT and not elsewhere:
            elsewhere.append(trigger)
            _compacting_elsewhere(h)
            try:
                return run(session_id, trigger, **options)
            finally:
                assert lock.release(h.factory, h.session_id, lock.COMPACTION, "other-worker:1")
        return run(session_id, trigger, **options)

    monkeypatch.setattr(compactor, "run", busy_at_preflight)
    outcome, _, _ = h.turn(question)
    assert elsewhere, "preflight found the other compaction"
    assert [r.status is RunStatus.BUSY for r in outcome.compactions] == [True, False]
    assert outcome.compactions[-1].applied
    (call,) = h.main.calls
    assert COUNTER.count_messages(call.messages) < THRESHOLD
    assert call.messages[-1]["content"] == "what did we decide overnight?"
