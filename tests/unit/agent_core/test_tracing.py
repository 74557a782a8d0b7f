"""Tracing off costs nothing: shared no-op objects, no wrapper, nothing stored."""

from __future__ import annotations

from agent_core import tracing
from agent_core.config import Settings
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.llm.models import ModelSet
from agent_core.llm.wrapper import TracedModel
from tests.fixtures.traces import LocalSpans


def test_off_every_helper_returns_the_same_noop() -> None:
    assert not tracing.enabled()
    first = tracing.span("a", parent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")
    assert first is tracing.span("b", root=True) is tracing.nested("c")
    with first as span:
        assert not span.is_recording()
        assert tracing.traceparent() is None


def test_off_models_are_not_wrapped() -> None:
    models = ModelSet(Settings(model="openai/gpt-4o-mini"))
    assert isinstance(models.main(), LiteLLMModel)


def test_on_models_are_spans_and_nested_needs_a_recording_parent(
    local_spans: LocalSpans,
) -> None:
    models = ModelSet(Settings(model="openai/gpt-4o-mini"))
    assert isinstance(models.main(), TracedModel)
    with tracing.nested("orphan") as orphan:
        assert not orphan.is_recording()
    with tracing.span("root", root=True):
        parent = tracing.traceparent()
        with tracing.nested("child") as child:
            assert child.is_recording()
    assert parent is not None
    seen = {s.name: s for s in local_spans.seen()}
    assert set(seen) == {"root", "child"}
    assert seen["child"].parent_id == seen["root"].span_id
    assert parent.split("-")[2] == seen["root"].span_id


def test_configure_without_endpoint_stays_off() -> None:
    tracing.configure(None, service="hubbub")
    tracing.configure("", service="hubbub")
    assert not tracing.enabled()
