"""OpenTelemetry traces of a message's way through Hubbub, or nothing at all.

Tracing is off unless an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT``).
Off, every helper answers with shared no-op objects: no provider, no exporter, no span
and no allocation on the turn path. On, spans go to the endpoint over OTLP/HTTP from a
background batch processor.

A message's trace is carried as a W3C ``traceparent`` string: stored on the message row
at intake, it lets whichever worker (or sweeper) runs the turn continue the trace, even
when the broker lost the doorbell. A caller's ``traceparent`` header on a webhook, web
chat or admin request is continued (:mod:`gateway.traced`), so its message's trace is
the caller's; a delivery retried after its turn is a trace of its own, linked to it.
Only ids, names and counts become attributes: never message bodies, prompts or secrets.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "Span",
    "SpanKind",
    "configure",
    "enabled",
    "install",
    "nested",
    "recording",
    "span",
    "traceparent",
]

TRACER_NAME = "hubbub"
TRACEPARENT = "traceparent"
"""The W3C header name, also the key under which a message row keeps its trace."""

_NOOP: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)
"""What every helper returns while tracing is off: reusable, re-entrant, allocation-free."""
_PROPAGATOR = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None
_provider: TracerProvider | None = None


def enabled() -> bool:
    """Whether spans are recorded in this process."""
    return _tracer is not None


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL under a base endpoint (as the OTel SDK derives it)."""
    return endpoint.rstrip("/") + "/v1/traces"


def configure(endpoint: str | None, *, service: str) -> None:
    """Export spans to ``endpoint`` over OTLP/HTTP; nothing at all when it is unset.

    Idempotent: a process configured once keeps its provider. ``service`` names the
    process unless ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name it already
    (the SDK reads those). Spans still queued at exit are flushed by the provider.
    """
    if not endpoint or _provider is not None:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(endpoint))))
    install(provider)


def install(provider: TracerProvider | None) -> None:
    """Record spans with ``provider``; ``None`` turns tracing off again.

    Tests pass a provider with an in-memory exporter. The global OpenTelemetry provider is
    left alone.
    """
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer(TRACER_NAME) if provider is not None else None


def span(
    name: str,
    *,
    parent: str | None = None,
    root: bool = False,
    links: Iterable[str | None] = (),
    kind: SpanKind = SpanKind.INTERNAL,
) -> AbstractContextManager[Span]:
    """A span made current for the ``with`` block; a no-op while tracing is off.

    Args:
        name: the span's name.
        parent: a W3C traceparent to continue (a stored message's); else the current span.
        root: start a trace of its own (when ``parent`` is not given).
        links: traceparents of spans this one follows from (``None`` entries skipped):
            a compaction links to the turn or message that triggered it.
        kind: the span kind.
    """
    tracer = _tracer
    if tracer is None:
        return _NOOP
    context: Context | None = None
    if parent:
        context = _PROPAGATOR.extract({TRACEPARENT: parent})
    elif root:
        context = Context()
    return tracer.start_as_current_span(name, context=context, kind=kind, links=list(_links(links)))


def nested(name: str, *, kind: SpanKind = SpanKind.INTERNAL) -> AbstractContextManager[Span]:
    """A child of the current span, or a no-op when there is none being recorded.

    For steps (model calls, tools, deliveries) that only mean something inside a traced
    turn or compaction: outside one (a retry task, a pool thread) they start no trace.
    """
    tracer = _tracer
    if tracer is None or not trace.get_current_span().is_recording():
        return _NOOP
    return tracer.start_as_current_span(name, kind=kind)


def recording() -> bool:
    """Whether a span is being recorded here now (an HTTP request's, a turn's)."""
    return _tracer is not None and trace.get_current_span().is_recording()


def traceparent() -> str | None:
    """The current span as a W3C traceparent, to store or send on; ``None`` when off."""
    if _tracer is None:
        return None
    current = trace.get_current_span()
    if not current.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get(TRACEPARENT)


def _links(traceparents: Iterable[str | None]) -> Iterator[Link]:
    for value in traceparents:
        if not value:
            continue
        context = trace.get_current_span(_PROPAGATOR.extract({TRACEPARENT: value}))
        span_context = context.get_span_context()
        if span_context.is_valid:
            yield Link(span_context)
