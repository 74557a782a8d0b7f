"""Store one tool exchange in a session: the assistant's calls, then each call's result.

The rows are ordinary chat messages (``tool_calls`` on the assistant row, ``role: tool``
with ``tool_call_id`` and ``name`` on the results) with exact token counts, placed right
after the message being answered and before its final reply, so they survive restarts
and compactions and read back as OpenAI-format messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import ChatSession, Message, MessageKind, TurnState
from agent_core.db.tables import MESSAGES
from agent_core.sessions.repository import SeqAllocation, SessionRepository
from agent_core.sessions.transcript import chat_message
from agent_core.tokens import TokenCounter
from agent_core.tools.output import FittedResult
from agent_core.tools.text import storable_text

_INSERT = insert(MESSAGES).returning(MESSAGES.c.id, sort_by_parameter_order=True)


@dataclass(frozen=True, slots=True)
class StoredExchange:
    """The rows of one stored exchange and the session's numbers after it."""

    ids: list[int]
    """The new message ids: the assistant message first, then the results in order."""
    messages: list[dict[str, Any]]
    """The rows as a transcript read back from the database shows them."""
    token_counts: list[int]
    allocation: SeqAllocation
    """The session's counters as the rows' numbers were handed out."""


def append_tool_exchange(
    db: Session,
    chat_session: ChatSession,
    trigger: Message,
    *,
    content: str | None,
    tool_calls: Sequence[dict[str, Any]],
    results: Sequence[FittedResult],
    counter: TokenCounter,
) -> StoredExchange:
    """Append the assistant message carrying ``tool_calls`` and the results, in one go.

    Args:
        db: the unit of work (flushes, never commits).
        chat_session: the session of the turn.
        trigger: the message the turn answers; the rows sit in its place.
        content: text the model sent along with the calls, if any.
        tool_calls: the calls, in the OpenAI format, as the model made them.
        results: one fitted result per call (:func:`agent_core.tools.output.fit_results`).
        counter: the session's token counter.

    Returns:
        The new rows' ids and the session's counters after them.
    """
    calls = [dict(call) for call in tool_calls]
    assistant = {"role": "assistant", "content": content, "tool_calls": calls}
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = [(assistant, {})]
    for result in results:
        message = result.message()
        message["content"] = storable_text(message["content"])
        meta: dict[str, Any] = {"is_error": result.is_error}
        if result.stored_ref is not None:
            meta |= {"stored_ref": result.stored_ref, "original_chars": result.original_chars}
        rows.append((message, meta))
    counted = [(message, meta, counter.count_message(message)) for message, meta in rows]
    allocation = SessionRepository.from_session(db).allocate_seq(
        chat_session.id,
        active_tokens=sum(tokens for _, _, tokens in counted),
        active_messages=len(counted),
        count=len(counted),
    )
    first = allocation.seq - len(counted) + 1
    now = utcnow()
    inserted = db.execute(
        _INSERT,
        [
            {
                "session_id": chat_session.id,
                "bot_id": chat_session.bot_id,
                "seq": first + offset,
                "anchor_seq": trigger.anchor_seq,
                "role": message["role"],
                "kind": MessageKind.CHAT,
                "content": message.get("content"),
                "tool_calls": message.get("tool_calls"),
                "tool_call_id": message.get("tool_call_id"),
                "name": message.get("name"),
                "turn_state": TurnState.NONE,
                "token_count": tokens,
                "token_encoding": counter.encoding_name,
                "archived": False,
                "deleted": False,
                "meta": meta,
                "created_at": now,
            }
            for offset, (message, meta, tokens) in enumerate(counted)
        ],
    )
    shown = [
        chat_message(
            message["role"],
            message.get("content"),
            message.get("tool_calls"),
            message.get("tool_call_id"),
            message.get("name"),
            None,
            None,
            chat_type=chat_session.chat_type,
        )
        for message, _, _ in counted
    ]
    return StoredExchange(
        [int(row[0]) for row in inserted],
        shown,
        [tokens for _, _, tokens in counted],
        allocation,
    )
