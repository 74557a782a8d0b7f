"""``/stop`` reaches a running compaction: no summary call after it, nothing stored."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from agent_core.busy import STOP_COMMAND
from agent_core.compaction.runner import RunStatus
from agent_core.compaction.triggers import Trigger
from agent_core.db.engine import transaction
from agent_core.db.models import Message
from agent_core.sessions.service import IncomingMessage, record_incoming
from tests.integration.agent_core.test_agent import COUNTER, Harness
from tests.unit.agent_core.context.scripted import ScriptedModel
from workers.turns import StopLook

pytestmark = pytest.mark.integration


def _command(h: Harness, name: str) -> int:
    with transaction(h.factory) as db:
        result = record_incoming(
            db,
            IncomingMessage(
                h.conversation,
                f"/{name}",
                f"cmd-{name}",
                "u1",
                "Ann",
                is_command=True,
                meta={"command": name},
            ),
            COUNTER,
        )
    return result.message_id


def _seq(h: Harness, message_id: int) -> int:
    with transaction(h.factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        return message.seq


def test_a_compaction_told_to_stop_makes_no_further_summary_call_and_stores_nothing(factory):
    h = Harness(factory, compression_summary_concurrency=1)
    # A small summary window: the middle takes several calls, one at a time.
    h.summary = ScriptedModel("scripted/aux", context_length=8192)
    h.chatter(30, words=400)

    report = h.services.compactor.run(
        h.session_id, Trigger.MANUAL, should_stop=lambda: len(h.summary.calls) >= 1
    )

    assert report.status is RunStatus.STOPPED
    assert len(h.summary.calls) == 1, "the call in flight ran; no later one was made"
    assert h.session().compaction_count == 0
    with transaction(factory) as db:
        archived = db.scalar(
            select(func.count()).select_from(Message).where(Message.archived.is_(True))
        )
    assert archived == 0


def test_a_stop_is_found_only_behind_the_message_it_would_stop(factory):
    h = Harness(factory)
    h.say("hello")
    compress = _command(h, "compress")
    look = StopLook(h.factory, h.session_id, after_seq=_seq(h, compress))
    assert not look()
    h.say("and another thing")
    assert not look(), "a chat message does not stop a compaction"
    stop = _command(h, STOP_COMMAND)
    assert look()
    assert look.stop_id == stop
    assert not StopLook(h.factory, h.session_id, after_seq=_seq(h, stop))()
