"""The tool round in flight: its calls recorded before they run, each result as it returns.

A worker can die between two tool calls of one response (after ``memory`` wrote a fact,
while the next call runs). The transcript only ever gets whole rounds (the assistant's
calls and every result, :func:`~agent_core.tools.transcript.append_tool_exchange`), so a
turn run again would ask the model again and run its tools again. Instead the round is
journaled on the message being answered (``meta["tool_round"]``, each step in its own
committed transaction): a turn run again finds the journal, reuses every stored result
(never running that call again), runs only the calls without one, and stores the round as
if nothing had happened: the model sees the same calls and results it would have seen.
Only a call that was running at the crash runs again (its result was never stored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_core.db.models import Message
from agent_core.tools.output import ToolResultDraft

META_KEY = "tool_round"


@dataclass(frozen=True, slots=True)
class ToolRound:
    """One response's tool calls and the results stored so far, by the call's position.

    Positions, not ``tool_call_id``: a provider may send empty or repeated ids.
    """

    content: str | None
    calls: tuple[dict[str, Any], ...]
    results: dict[int, ToolResultDraft]

    def missing(self) -> list[int]:
        """Positions of the calls that have no stored result yet, in order."""
        return [index for index in range(len(self.calls)) if index not in self.results]

    def drafts(self) -> list[ToolResultDraft]:
        """Every call's result, in the calls' order (all must be stored)."""
        return [self.results[index] for index in range(len(self.calls))]


def pending(trigger: Message) -> ToolRound | None:
    """The round a previous run of this turn left unfinished, if any."""
    raw = (trigger.meta or {}).get(META_KEY)
    if not isinstance(raw, dict):
        return None
    results = {
        int(index): ToolResultDraft(
            tool_call_id=str(value.get("tool_call_id", "")),
            name=str(value.get("name", "")),
            content=str(value.get("content", "")),
            is_error=bool(value.get("is_error", False)),
            storable=bool(value.get("storable", True)),
        )
        for index, value in (raw.get("results") or {}).items()
    }
    return ToolRound(raw.get("content"), tuple(raw.get("tool_calls") or ()), results)


def begin(
    db: Session, message_id: int, content: str | None, calls: list[dict[str, Any]]
) -> ToolRound:
    """Record a response's calls before any of them runs."""
    trigger = locked(db, message_id)
    trigger.meta = {
        **trigger.meta,
        META_KEY: {"content": content, "tool_calls": calls, "results": {}},
    }
    db.flush()
    return ToolRound(content, tuple(calls), {})


def record(db: Session, message_id: int, index: int, draft: ToolResultDraft) -> None:
    """Store the result of the round's call at ``index`` the moment it returns."""
    trigger = locked(db, message_id)
    journal = dict(trigger.meta.get(META_KEY) or {})
    journal["results"] = {
        **(journal.get("results") or {}),
        str(index): {
            "tool_call_id": draft.tool_call_id,
            "name": draft.name,
            "content": draft.content,
            "is_error": draft.is_error,
            "storable": draft.storable,
        },
    }
    trigger.meta = {**trigger.meta, META_KEY: journal}
    db.flush()


def clear(trigger: Message) -> None:
    """Drop the journal: the round is in the transcript now (same unit of work)."""
    if META_KEY in (trigger.meta or {}):
        trigger.meta = {k: v for k, v in trigger.meta.items() if k != META_KEY}


def locked(db: Session, message_id: int) -> Message:
    """The turn's message, row-locked until commit: the journal lives in its meta."""
    return db.scalars(select(Message).where(Message.id == message_id).with_for_update()).one()
