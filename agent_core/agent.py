"""The per-turn agent: built fresh for every turn, it answers one message.

It holds no state between turns; everything it needs (the frozen system prompt, the
transcript) is handed to it, and everything it learns (the reply, the provider's usage)
is handed back for the caller to store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.llm.model import ChatModel, Usage


@dataclass(frozen=True, slots=True)
class TurnReply:
    """The agent's answer and what it cost."""

    text: str
    usage: Usage | None
    llm_seconds: float
    """Time spent waiting for the provider, retries included."""
    model: str
    llm_calls: int = 1


EMPTY_REPLY = "(The model returned an empty reply.)"


class Agent:
    """Answers a transcript with one model.

    Args:
        model: the chat model seam.
        system_prompt: the session's frozen prompt, used unchanged.
    """

    def __init__(self, model: ChatModel, *, system_prompt: str) -> None:
        self.model = model
        self.system_prompt = system_prompt

    def request_messages(self, transcript: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The exact message list sent to the provider."""
        return [{"role": "system", "content": self.system_prompt}, *map(dict, transcript)]

    def respond(self, transcript: Sequence[Mapping[str, Any]]) -> TurnReply:
        """Answer the last message of ``transcript``.

        Raises:
            ProviderError: the model call failed after retries.
        """
        result = self.model.complete(self.request_messages(transcript))
        text = (result.content or "").strip() or EMPTY_REPLY
        return TurnReply(
            text=text,
            usage=result.usage,
            llm_seconds=result.latency_seconds,
            model=result.model or self.model.name,
        )
