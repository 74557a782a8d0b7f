"""The metering wrapper: every call through it is charged to the ledger as it returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.llm.model import ChatModel, ChatResult, Message, TextSink
from agent_core.llm.wrapper import WrapperModel
from agent_core.usage.ledger import CallKeys, PendingCall, Purpose, UsageLedger, UsageScope


class LedgerModel(WrapperModel):
    """A chat model whose answered calls each write a usage row.

    Failed calls raise through and charge nothing (the provider bills none either).

    Args:
        wrapped: the model called.
        ledger: where rows go.
        scope: whom the calls are charged to.
        purpose: main or summary.
        keys: names the calls (shared by the models of one compaction).
        pending: when given, calls are added to it for the caller to charge in its own
            transaction (a turn's rows commit with the tool round or reply they produced);
            otherwise each is charged at once.
    """

    def __init__(
        self,
        wrapped: ChatModel,
        ledger: UsageLedger,
        scope: UsageScope,
        purpose: Purpose,
        keys: CallKeys,
        pending: list[PendingCall] | None = None,
    ) -> None:
        super().__init__(wrapped)
        self._pending = pending
        self._ledger = ledger
        self._scope = scope
        self._purpose = purpose
        self._keys = keys

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """The wrapped model's answer, charged under the next key to the model that gave it.

        A chain's fallback answers at its own price, so the row names the result's model;
        the wrapped model's name stands in when the result names none.
        """
        result = self.wrapped.complete(
            messages, tools=tools, max_tokens=max_tokens, on_text=on_text
        )
        key, name = self._keys.next(), result.model or self.wrapped.name
        if self._pending is None:
            self._ledger.record(self._scope, key, self._purpose, name, result.usage)
        else:
            at = self._ledger.clock()
            self._pending.append(
                PendingCall(self._scope, key, self._purpose, name, result.usage, at)
            )
        return result
