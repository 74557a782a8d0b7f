"""A delivery retried after its turn is a trace of its own, linked to the turn's trace."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent_core import tracing
from agent_core.db.engine import transaction
from agent_core.db.models import Message, OutboxEntry
from tests.fixtures.outbox import TELEGRAM_CHAT, Platforms, World
from tests.fixtures.pacing import LocalPacing
from tests.fixtures.platform_servers.telegram import TelegramFailure
from tests.fixtures.traces import LocalSpans, named

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("_restore_discord_globals")]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def _stamp_trace(world: World, outbox_id: int) -> None:
    """Store a trace on the question, as intake does for a traced message."""
    with transaction(world.factory) as db:
        trigger_id = db.scalars(
            select(OutboxEntry.trigger_message_id).where(OutboxEntry.id == outbox_id)
        ).one()
        trigger = db.get(Message, trigger_id)
        assert trigger is not None
        trigger.meta = {**trigger.meta, tracing.TRACEPARENT: f"00-{TRACE_ID}-{SPAN_ID}-01"}


def test_each_retry_is_a_span_linked_to_the_turns_trace(
    world: World, platforms: Platforms, local_spans: LocalSpans, local_pacing: LocalPacing
) -> None:
    outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT)
    _stamp_trace(world, outbox_id)
    platforms.telegram.fail_next("sendMessage", TelegramFailure.rate_limited(300))

    assert world.service.deliver(outbox_id) is False
    world.make_due(outbox_id)
    local_pacing.advance(300)  # the chat is held back for Telegram's wait, too
    assert world.service.deliver(outbox_id) is True

    attempts = named(local_spans.seen(), "hubbub.delivery")
    assert [a.attributes["hubbub.delivered"] for a in attempts] == [False, True]
    for attempt in attempts:
        assert attempt.parent_id is None, "a trace of its own"
        assert attempt.trace_id != TRACE_ID
        assert attempt.links == ((TRACE_ID, SPAN_ID),)
        assert attempt.attributes["hubbub.outbox_id"] == outbox_id
    assert attempts[0].trace_id != attempts[1].trace_id


def test_inside_a_traced_turn_the_attempt_is_its_child(
    world: World, platforms: Platforms, local_spans: LocalSpans
) -> None:
    outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT)
    with tracing.span("hubbub.turn", root=True):
        assert world.service.deliver(outbox_id) is True
    (turn,) = named(local_spans.seen(), "hubbub.turn")
    (attempt,) = named(local_spans.seen(), "hubbub.delivery")
    assert (attempt.trace_id, attempt.parent_id) == (turn.trace_id, turn.span_id)
    assert attempt.links == ()
