"""A chat model that switches, once and for good, to a second model when the first fails.

The summary model is usually a small, cheap one; when it is misconfigured or down, the
main model carries on summarising. The switch is a wrapper around the seam, so the
summarizer sees one model and never decides about fallbacks itself.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.errors import ProviderError
from agent_core.llm.model import ChatModel, ChatResult, Message, TextSink


class FallbackModel:
    """``primary`` until one of its calls fails, then ``fallback`` for every later call.

    Calls made concurrently may each find the primary failing; every one of them is
    retried on the fallback, whose errors are raised.
    """

    def __init__(self, primary: ChatModel, fallback: ChatModel) -> None:
        self.primary = primary
        self.fallback = fallback
        self._fell_back = False
        self._lock = threading.Lock()

    @property
    def fell_back(self) -> bool:
        """Whether the fallback replaced the primary."""
        return self._fell_back

    @property
    def current(self) -> ChatModel:
        """The model the next call goes to."""
        return self.fallback if self._fell_back else self.primary

    @property
    def name(self) -> str:
        """The name of the model the next call goes to."""
        return self.current.name

    @property
    def context_length(self) -> int:
        """The smaller window: a request sized for it fits either model."""
        return min(self.primary.context_length, self.fallback.context_length)

    @property
    def max_output_tokens(self) -> int | None:
        """The primary's output reservation."""
        return self.primary.max_output_tokens

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The current model's answer, or the fallback's after the primary failed.

        Raises:
            ProviderError: the fallback failed too.
        """
        if not self._fell_back:
            try:
                return self.primary.complete(
                    messages, tools=tools, max_tokens=max_tokens, on_text=on_text
                )
            except ProviderError:
                with self._lock:
                    self._fell_back = True
        return self.fallback.complete(messages, tools=tools, max_tokens=max_tokens, on_text=on_text)
