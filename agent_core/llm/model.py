"""The one seam for "call a model": a protocol and the values that cross it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = Mapping[str, Any]
TextSink = Callable[[str], None]
"""Receives the reply's text so far (the whole text, not a delta) while the model streams.

It may raise :class:`CallStopped` to end the call there (a ``/stop`` came)."""


class CallStopped(Exception):
    """A call was not made, or a streamed one was ended: whoever asked for it said to stop.

    Not a :class:`~agent_core.errors.ProviderError`: no model error handler catches it, and
    no fallback model is tried.
    """


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it."""

    prompt_tokens: int
    """The real size of the prompt: the number every context decision trusts most."""
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the provider's prompt cache, when reported."""


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One model response."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    usage: Usage | None = None
    model: str = ""
    """The model that answered: a fallback's name when the chain moved on to it."""
    finish_reason: str | None = None
    latency_seconds: float = 0.0
    """Wall time of the provider call, retries and back-off included."""
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a chat transcript.

    Implementations raise only :class:`agent_core.errors.ProviderError` subclasses.
    """

    @property
    def name(self) -> str:
        """The model string, e.g. ``openai/gpt-4o-mini``."""
        ...

    @property
    def context_length(self) -> int:
        """The model's input window in tokens."""
        ...

    @property
    def max_output_tokens(self) -> int | None:
        """The output reservation, when known."""
        ...

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """Answer the transcript.

        With ``on_text`` the answer is streamed: ``on_text`` gets the text so far each
        time it grows, until the model starts a tool call (tool-call text is not shown).
        The result is the same as without it.

        Raises:
            ProviderError: the call failed after the model's own retry policy.
            CallStopped: ``on_text`` raised it; the stream was closed there.
        """
        ...
