"""Busy modes: what messages that address the bot do while a turn of their session runs.

* ``queue``: each gets its own turn, in order, after the running one;
* ``collect``: a run of them (and those arriving within the collect window after the
  first) is answered by ONE turn, to the latest; the others are marked answered by it;
* ``interrupt``: the running turn stops at its next safe point and the newest message is
  answered with everything before it in the transcript; the interrupted one gets no reply;
* ``steer``: they reach a running tool loop through the steer channel
  (:mod:`agent_core.agent.steer`); with no tool loop running they queue.

``/stop`` stops the running turn in every mode. The decisions here are pure functions of
the waiting messages the database holds, so every worker process reaches the same one:
the waiting rows *are* the cancel signal a turn in another process reads at its safe points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

STOP_COMMAND = "stop"
ANSWERED_BY = "answered_by"
"""Meta key of a collected message: the id of the message whose turn answered it."""
INTERRUPTED_BY = "interrupted_by"
"""Meta key of a message whose turn was stopped: the id of the message that stopped it."""


def is_stop(is_command: bool, meta: Mapping[str, Any] | None) -> bool:
    """Whether a message is a ``/stop`` (a command whose meta names it)."""
    return is_command and (meta or {}).get("command") == STOP_COMMAND


class BusyMode(StrEnum):
    """A bot's busy mode."""

    QUEUE = "queue"
    COLLECT = "collect"
    INTERRUPT = "interrupt"
    STEER = "steer"


BUSY_MODES = tuple(mode.value for mode in BusyMode)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A message waiting for its turn, as far as busy modes care."""

    id: int
    seq: int
    arrived: datetime
    mergeable: bool
    """A chat message the model answers (not a command, not a rate-limit notice)."""
    stop: bool = False
    """A ``/stop`` command."""


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """One turn to run: the message it answers and those it answers with it."""

    answer: int
    absorbed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Interruption:
    """Why a running turn must stop at this safe point."""

    by: int
    """The message that stops it (the ``/stop`` command, or the newest chat message)."""
    stop: bool
    """``True`` for a ``/stop``: that command is answered with a confirmation."""


def _merges(mode: BusyMode) -> bool:
    return mode in (BusyMode.COLLECT, BusyMode.INTERRUPT)


def plan_turns(waiting: Sequence[Waiting], mode: BusyMode) -> list[TurnPlan]:
    """The turns that answer ``waiting`` (in arrival order), in order.

    In ``collect`` and ``interrupt`` each run of consecutive chat messages is answered by
    one turn, to its latest message; a command or notice between them keeps its own turn
    and its place, so the order of answers always follows the order of messages.
    """
    if not _merges(mode):
        return [TurnPlan(w.id) for w in waiting]
    plans: list[TurnPlan] = []
    run: list[int] = []
    for w in waiting:
        if w.mergeable:
            run.append(w.id)
            continue
        if run:
            plans.append(TurnPlan(run[-1], tuple(run[:-1])))
            run = []
        plans.append(TurnPlan(w.id))
    if run:
        plans.append(TurnPlan(run[-1], tuple(run[:-1])))
    return plans


def collect_wait_seconds(
    waiting: Sequence[Waiting], mode: BusyMode, *, now: datetime, window: float
) -> float:
    """How long to wait before the first turn so quick follow-ups join it (``collect``).

    The window runs from the arrival of the first waiting chat message; messages that
    waited behind a running turn are usually past it already and start at once.
    """
    if mode is not BusyMode.COLLECT or not waiting or not waiting[0].mergeable:
        return 0.0
    waited = (now - waiting[0].arrived).total_seconds()
    return max(window - waited, 0.0)


def interruption(newer: Sequence[Waiting], mode: BusyMode) -> Interruption | None:
    """Whether the running turn must stop, judged on the messages waiting behind it.

    A ``/stop`` stops it in every mode; in ``interrupt`` so does any newer chat message
    (the newest is the one answered next).
    """
    for w in newer:
        if w.stop:
            return Interruption(w.id, stop=True)
    if mode is BusyMode.INTERRUPT:
        chats = [w.id for w in newer if w.mergeable]
        if chats:
            return Interruption(chats[-1], stop=False)
    return None
