"""OpenTelemetry traces of real turns: one trace per inbound message, end to end.

Embedded: everything runs in this process and is read from the in-memory exporter. Celery:
the gateway runs here (in-memory exporter) and a real ``hubbub worker`` process exports
over OTLP/HTTP to a fake collector; the trace is followed across both, through Redis and
through the stored message row when the doorbell is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis

from agent_core import tracing
from tests.fixtures.llm_server import FakeLLM, ScriptedReply, tool_call
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    post_accepted,
    settings_from_env,
    start_worker,
    wait_replies,
    wait_until,
)
from tests.fixtures.traces import FakeCollector, LocalSpans, SeenSpan, children, named
from workers.broker import QUEUE, CeleryDispatcher, create_celery

pytestmark = pytest.mark.integration

SECRET_WORD = "zanzibar-7c1f"
"""Typed in the messages: it must never appear in a span."""


def _no_bodies(spans: list[SeenSpan]) -> None:
    for span in spans:
        for value in span.attributes.values():
            assert SECRET_WORD not in str(value), (span.name, span.attributes)


def _inbound_for(spans: list[SeenSpan], accepted: dict[str, str]) -> SeenSpan:
    """The intake span of a message the web chat accepted (its answer's ``id``)."""
    message_id = int(accepted["id"])
    (inbound,) = [
        s for s in named(spans, "hubbub.inbound") if s.attributes["hubbub.message_id"] == message_id
    ]
    return inbound


def _turn_of(spans: list[SeenSpan], inbound: SeenSpan) -> SeenSpan:
    """The turn answering ``inbound``'s message: a child of its span, in its trace."""
    (turn,) = children(spans, inbound, "hubbub.turn")
    assert turn.attributes["hubbub.message_id"] == inbound.attributes["hubbub.message_id"]
    assert turn.attributes["hubbub.session_id"] == inbound.attributes["hubbub.session_id"]
    return turn


def test_embedded_turn_is_one_trace_from_intake_to_delivery(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    local_spans: LocalSpans,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm)
    gateway = gateway_factory(settings_from_env(env))
    fake_llm.queue_replies(
        ScriptedReply(tool_calls=[tool_call("current_time", {})]),
        ScriptedReply(content="It is time."),
    )
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        first = post_accepted(client, "c1", f"what time is it, {SECRET_WORD}?").json()
        wait_replies(client, "c1", 1)
        second = post_accepted(client, "c1", "/compress").json()
        wait_replies(client, "c1", 2)
    spans = wait_until(
        lambda: (
            (s := local_spans.seen())
            and len(named(s, "hubbub.turn")) == 2
            and named(s, "hubbub.compaction")
            and s
        ),
        timeout=30,
        what="two turns and a compaction",
    )

    inbound = _inbound_for(spans, first)
    assert inbound.parent_id is None
    assert inbound.attributes["hubbub.platform"] == "webchat"
    assert inbound.attributes["hubbub.tenant"] == "default"
    turn = _turn_of(spans, inbound)
    assert turn.attributes["hubbub.platform"] == "webchat"
    assert turn.attributes["hubbub.tenant"] == "default"
    assert turn.attributes["hubbub.outcome"] == "reply"
    assert turn.attributes["hubbub.model_calls"] == 2
    assert turn.attributes["gen_ai.usage.input_tokens"] > 0
    calls = children(spans, turn, "hubbub.llm")
    assert len(calls) == 2
    assert all(c.attributes["gen_ai.usage.input_tokens"] > 0 for c in calls)
    (tool,) = children(spans, turn, "hubbub.tool")
    assert tool.attributes["gen_ai.tool.name"] == "current_time"
    (delivery,) = children(spans, turn, "hubbub.delivery")
    assert delivery.attributes["hubbub.delivered"] is True

    # /compress: the compaction is a trace of its own, linked to the turn that ran it.
    command_turn = _turn_of(spans, _inbound_for(spans, second))
    (compaction,) = named(spans, "hubbub.compaction")
    assert compaction.parent_id is None
    assert compaction.trace_id != command_turn.trace_id
    assert (command_turn.trace_id, command_turn.span_id) in compaction.links
    assert compaction.attributes["hubbub.trigger"] == "manual"
    _no_bodies(spans)


def test_worker_continues_the_message_trace_even_when_the_doorbell_is_lost(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    local_spans: LocalSpans,
    collector: FakeCollector,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    gateway = gateway_factory(settings_from_env(env))  # traced in memory, in this process
    worker_env = env | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        # No worker yet: the doorbell waits in Redis, and is lost with the queue.
        lost = post_accepted(client, "c1", f"first {SECRET_WORD}").json()
        broker = redis.Redis.from_url(redis_url)
        wait_until(lambda: broker.llen(QUEUE) == 1, timeout=60, what="the doorbell in Redis")
        assert broker.delete(QUEUE) == 1
        processes.append(start_worker(worker_env))
        wait_replies(client, "c1", 1, timeout=120)  # rung by the worker's sweeper
        rung = post_accepted(client, "c1", f"second {SECRET_WORD}").json()
        wait_replies(client, "c1", 2, timeout=120)
    session_id = _inbound_for(local_spans.seen(), lost).attributes["hubbub.session_id"]
    # A compaction asked for from a traced span crosses the broker in the task's headers.
    with tracing.span("test.ask", root=True):
        asked_by = tracing.traceparent()
        CeleryDispatcher(create_celery(settings_from_env(env))).kick_compaction(
            str(session_id), "idle"
        )
    assert asked_by is not None
    remote = wait_until(
        lambda: (
            (s := collector.seen())
            and len(named(s, "hubbub.turn")) == 2
            and named(s, "hubbub.compaction")
            and s
        ),
        timeout=40,
        what="the worker's turns and compaction at the collector",
    )
    spans = local_spans.seen() + remote

    for accepted in (lost, rung):
        inbound = _inbound_for(spans, accepted)
        assert inbound.parent_id is None
        turn = _turn_of(spans, inbound)
        assert turn.service == "hubbub"  # recorded by the worker process
        assert turn.attributes["hubbub.outcome"] == "reply"
        (call,) = children(spans, turn, "hubbub.llm")
        assert call.attributes["gen_ai.request.model"] == "openai/fake-model"
        assert call.attributes["gen_ai.usage.output_tokens"] > 0
        (delivery,) = children(spans, turn, "hubbub.delivery")
        assert delivery.attributes["hubbub.delivered"] is True
    (compaction,) = named(remote, "hubbub.compaction")
    _, trace_id, span_id, _ = asked_by.split("-")
    assert (trace_id, span_id) in compaction.links
    assert compaction.parent_id is None
    assert compaction.attributes["hubbub.trigger"] == "idle"
    _no_bodies(spans)
