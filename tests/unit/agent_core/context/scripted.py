"""A ChatModel test double that answers from a script and records every request."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.errors import ProviderError
from agent_core.llm.model import ChatResult, Message, TextSink, Usage

Reply = str | ProviderError | ChatResult | Callable[[Sequence[Message]], "str | ChatResult"]


@dataclass(frozen=True)
class Call:
    """One request the model received."""

    messages: list[dict[str, Any]]
    max_tokens: int | None
    tools: list[dict[str, Any]] | None = None

    @property
    def prompt(self) -> str:
        """The user prompt of a summary request."""
        return str(self.messages[-1]["content"])

    @property
    def chars(self) -> int:
        return sum(len(str(m.get("content") or "")) for m in self.messages)


def default_summary(messages: Sequence[Message]) -> str:
    """A short structured summary that mentions how much it read."""
    prompt = str(messages[-1]["content"])
    return (
        f"## Goal\nContinue the conversation ({len(prompt)} prompt chars read).\n## Blocked\nNone."
    )


class ScriptedModel:
    """Answers each request with the next scripted reply (then the default one).

    A reply is a string, a ``ProviderError`` to raise, or a function of the messages.
    """

    def __init__(
        self,
        name: str = "scripted/main",
        *,
        context_length: int = 128_000,
        max_output_tokens: int | None = None,
        replies: Iterable[Reply] = (),
        default: Reply = default_summary,
        prompt_tokens: int | None = None,
    ) -> None:
        self._name = name
        self._context_length = context_length
        self._max_output_tokens = max_output_tokens
        self._replies: deque[Reply] = deque(replies)
        self._default = default
        self._prompt_tokens = prompt_tokens
        """The usage every answer reports (default: a quarter of the characters sent)."""
        self.calls: list[Call] = []

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        self._replies.extend(replies)

    @property
    def name(self) -> str:
        return self._name

    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def max_output_tokens(self) -> int | None:
        return self._max_output_tokens

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        self.calls.append(
            Call([dict(m) for m in messages], max_tokens, [dict(t) for t in tools or ()] or None)
        )
        reply = self._replies.popleft() if self._replies else self._default
        if isinstance(reply, ProviderError):
            raise reply
        answer = reply(messages) if callable(reply) else reply
        if isinstance(answer, ChatResult):
            if on_text is not None and answer.content and not answer.tool_calls:
                on_text(answer.content)
            return answer
        text = answer
        if on_text is not None and text:
            on_text(text)
        prompt_tokens = self._prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
        return ChatResult(content=text, usage=Usage(prompt_tokens=prompt_tokens), model=self._name)
