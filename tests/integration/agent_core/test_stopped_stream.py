"""A message that stops the turn ends a streaming reply at the next look, not at its end."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from agent_core.agent import TurnEnd, loop
from agent_core.busy import STOP_COMMAND, BusyMode
from agent_core.llm.model import ChatResult, TextSink, Usage
from tests.integration.agent_core.test_agent import Harness
from tests.integration.agent_core.test_stopped_compaction import _command

pytestmark = pytest.mark.integration

WORDS = [f"word{n} " for n in range(40)]


class WordStream:
    """A model that streams its answer a word at a time, calling ``between`` after each."""

    name = "scripted/main"
    context_length = 128_000
    max_output_tokens = None

    def __init__(self, between: Callable[[int], None]) -> None:
        self._between = between
        self.shown: list[str] = []

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        text = ""
        for number, word in enumerate(WORDS):
            text += word
            if on_text is not None:
                on_text(text)
            self.shown.append(text)
            self._between(number)
        return ChatResult(content=text, usage=Usage(prompt_tokens=100), model=self.name)


@pytest.mark.parametrize(
    ("mode", "sent", "stops"),
    [
        (BusyMode.QUEUE, "stop", True),
        (BusyMode.INTERRUPT, "message", True),
        (BusyMode.QUEUE, "message", False),
    ],
    ids=["stop", "interrupting-message", "queued-message"],
)
def test_a_stop_that_arrives_mid_stream_ends_the_call_there(
    factory, monkeypatch: pytest.MonkeyPatch, mode: BusyMode, sent: str, stops: bool
) -> None:
    monkeypatch.setattr(loop, "STREAM_LOOK_SECONDS", 0.0)  # look at every chunk
    h = Harness(factory)
    message_id = h.say("tell me a long story")
    arrived: list[int] = []

    def between(number: int) -> None:
        if number == 4:
            if sent == "stop":
                arrived.append(_command(h, STOP_COMMAND))
            else:
                arrived.append(h.say("actually, never mind"))

    h.main = WordStream(between)  # type: ignore[assignment]
    shown: list[str] = []

    outcome, stored, _ = h.turn(message_id, busy_mode=mode, on_text=shown.append)

    if not stops:
        assert outcome.end is TurnEnd.REPLY
        assert len(shown) == len(WORDS)
        assert stored.outbox_id is not None
        return
    assert outcome.end is TurnEnd.INTERRUPTED
    assert outcome.interrupted is not None
    assert outcome.interrupted.by == arrived[0]
    assert outcome.interrupted.stop is (sent == "stop")
    assert len(shown) == 5, "the chunk after the message arrived was not shown: the call ended"
    assert stored.outbox_id is None, "no reply stored for the stopped turn"
    assert stored.closed


def test_a_stream_looks_for_a_stop_only_once_its_interval_has_passed() -> None:
    now = [0.0]
    looks: list[float] = []
    shown: list[str] = []

    def look() -> None:
        looks.append(now[0])

    watch = loop.StreamWatch(shown.append, look, 1.0, clock=lambda: now[0])
    for step in range(10):
        now[0] = step * 0.25
        watch(f"text {step}")

    assert looks == [1.0, 2.0], "one indexed read a second of streaming, not one a chunk"
    assert len(shown) == 10
