"""Behaviour around a :class:`ChatModel` by wrapping it: delegation, metering, blank answers.

Wrappers keep the seam narrow (pydantic-ai's ``WrapperModel``): callers see a plain chat
model, and what a wrapper adds (CPU accounting, fallback) never becomes a flag inside the
model or a helper inside its callers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_core import tracing
from agent_core.errors import ProviderError
from agent_core.llm.model import CallStopped, ChatModel, ChatResult, Message, TextSink


class WrapperModel:
    """A chat model that delegates everything to ``wrapped``; subclasses override parts."""

    def __init__(self, wrapped: ChatModel) -> None:
        self.wrapped = wrapped

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.wrapped.name

    @property
    def context_length(self) -> int:
        """The wrapped model's window."""
        return self.wrapped.context_length

    @property
    def max_output_tokens(self) -> int | None:
        """The wrapped model's output reservation."""
        return self.wrapped.max_output_tokens

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer."""
        return self.wrapped.complete(messages, tools=tools, max_tokens=max_tokens, on_text=on_text)


class StoppableModel(WrapperModel):
    """A chat model that makes no new call once ``should_stop`` says so.

    A call already in flight runs to its end; the next one raises :class:`CallStopped`,
    which no model error handler catches (it is not a :class:`ProviderError`).
    """

    def __init__(self, wrapped: ChatModel, should_stop: Callable[[], bool]) -> None:
        super().__init__(wrapped)
        self._should_stop = should_stop

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer, unless a stop came first.

        Raises:
            CallStopped: ``should_stop`` said so; nothing was sent.
        """
        if self._should_stop():
            raise CallStopped
        return self.wrapped.complete(messages, tools=tools, max_tokens=max_tokens, on_text=on_text)


class Meter:
    """What model calls cost their callers: thread CPU inside ``complete`` and call count.

    The compressor reports its own CPU; the summary calls it makes would dominate that
    figure (litellm's request building and parsing), so they are measured and taken out.
    Calls run on several threads (concurrent chunk summaries): CPU is kept per thread, so
    a caller takes out only what its own thread spent.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cpu_by_thread: dict[int, float] = {}
        self.calls = 0

    def add(self, cpu_seconds: float) -> None:
        """Count one call that took ``cpu_seconds`` of the current thread's CPU."""
        thread = threading.get_ident()
        with self._lock:
            self._cpu_by_thread[thread] = self._cpu_by_thread.get(thread, 0.0) + cpu_seconds
            self.calls += 1

    @property
    def cpu_seconds(self) -> float:
        """CPU the calls made on the current thread took."""
        with self._lock:
            return self._cpu_by_thread.get(threading.get_ident(), 0.0)


class MeteredModel(WrapperModel):
    """A chat model whose calls are added to a :class:`Meter`."""

    def __init__(self, wrapped: ChatModel, meter: Meter) -> None:
        super().__init__(wrapped)
        self.meter = meter

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer; its thread CPU goes to the meter."""
        started = time.thread_time()
        try:
            return self.wrapped.complete(
                messages, tools=tools, max_tokens=max_tokens, on_text=on_text
            )
        finally:
            self.meter.add(time.thread_time() - started)


class TracedModel(WrapperModel):
    """A chat model whose calls are spans of the current turn or compaction.

    Attributes follow OpenTelemetry's GenAI conventions: the model and the token counts
    the provider reported, never the prompt or the answer.
    """

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer, inside a ``hubbub.llm`` span."""
        with tracing.nested("hubbub.llm", kind=tracing.SpanKind.CLIENT) as span:
            span.set_attributes(
                {"gen_ai.request.model": self.name, "hubbub.tools_offered": len(tools or ())}
            )
            result = self.wrapped.complete(
                messages, tools=tools, max_tokens=max_tokens, on_text=on_text
            )
            attributes: dict[str, str | int] = {
                "gen_ai.response.model": result.model or self.name,
                "hubbub.attempts": result.attempts,
                "hubbub.tool_calls": len(result.tool_calls or ()),
            }
            if result.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = result.finish_reason
            if result.usage is not None:
                attributes["gen_ai.usage.input_tokens"] = result.usage.prompt_tokens
                attributes["gen_ai.usage.output_tokens"] = result.usage.completion_tokens
                attributes["hubbub.cached_tokens"] = result.usage.cached_tokens
            span.set_attributes(attributes)
            return result


class EmptyReplyError(ProviderError):
    """The model answered without any text (and without tool calls)."""


class TextRequired(WrapperModel):
    """A chat model whose answers without text are failures.

    A summary that came back empty is as useless as an error; raising makes the fallback
    to the main model (or the deterministic digest) take over.
    """

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer, which has text or tool calls.

        Raises:
            EmptyReplyError: the answer is blank.
        """
        result = self.wrapped.complete(
            messages, tools=tools, max_tokens=max_tokens, on_text=on_text
        )
        if not (result.content or "").strip() and not result.tool_calls:
            raise EmptyReplyError(self.name, "the model returned no text")
        return result
