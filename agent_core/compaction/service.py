"""Load a session's transcript for the context engine and apply what it returns.

Functions take the unit of work first; they flush, never commit. The caller holds the
session's compaction lease and the session row lock while applying.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.orm import Session

from agent_core.compaction.repository import CompactionRepository
from agent_core.context import CompressionResult, EngineState, summary_message
from agent_core.db.base import utcnow
from agent_core.db.models import ChatSession, Compaction
from agent_core.sessions.transcript import chat_message
from agent_core.tokens import TokenCounter

_STATE_IN_JSON = (
    "cooldown_reason",
    "awaiting_real_usage",
    "tokens_before_compaction",
    "post_compaction_rough",
    "fit_proven",
)
"""Engine state kept in ``sessions.context_state``; the rest has its own columns."""
PRE_COMPACTION_KEY = "pre_compaction"
"""Where a pruned message keeps its original, in its ``meta``."""


class StoredState(Protocol):
    """The session columns the engine state lives in (a session row or a light row)."""

    compaction_count: int
    ineffective_compactions: int
    summary: str | None
    summary_version: int
    compaction_cooldown_until: datetime | None
    last_prompt_tokens: int
    context_state: dict[str, Any]


def engine_state(chat_session: StoredState) -> EngineState:
    """The context engine's state as stored on the session."""
    extra = chat_session.context_state or {}
    return EngineState.from_dict(
        {
            "compression_count": chat_session.compaction_count,
            "ineffective_count": chat_session.ineffective_compactions,
            "summary": chat_session.summary,
            "summary_version": chat_session.summary_version,
            "cooldown_until": chat_session.compaction_cooldown_until,
            "last_prompt_tokens": chat_session.last_prompt_tokens,
            **{key: extra[key] for key in _STATE_IN_JSON if key in extra},
        }
    )


def engine_state_values(state: EngineState, context_state: dict[str, Any]) -> dict[str, Any]:
    """The session column values that store ``state`` (``context_state`` keeps its other keys)."""
    data = state.to_dict()
    return {
        "compaction_count": state.compression_count,
        "ineffective_compactions": state.ineffective_count,
        "summary": state.summary,
        "summary_version": state.summary_version,
        "compaction_cooldown_until": state.cooldown_until,
        "last_prompt_tokens": state.last_prompt_tokens,
        "context_state": {**context_state, **{key: data[key] for key in _STATE_IN_JSON}},
    }


def store_engine_state(chat_session: ChatSession, state: EngineState) -> None:
    """Write the engine's state onto the session (columns plus ``context_state``)."""
    for column, value in engine_state_values(state, chat_session.context_state or {}).items():
        setattr(chat_session, column, value)


CALIBRATION_KEY = "token_calibration"
CALIBRATION_BOUNDS = (0.5, 2.0)
"""Provider counts outside this band of ours mean something else is wrong; clamp."""


def token_calibration(chat_session: StoredState) -> float:
    """Provider tokens per token of our count for this session (1.0 until measured).

    Our counts use the tiktoken encoding of the model's family (``cl100k_base`` when
    unknown), which differs from Claude's or Llama's tokenizers; the provider's reported
    ``prompt_tokens`` tell how much, and every gate scales our exact counts by it.
    """
    value = (chat_session.context_state or {}).get(CALIBRATION_KEY, 1.0)
    return float(value)


def with_token_calibration(
    context_state: dict[str, Any], *, provider_tokens: int, counted_tokens: int
) -> dict[str, Any]:
    """``context_state`` with the calibration learnt from a response.

    The ratio is the provider's count against ours; unchanged when either is missing.
    """
    if provider_tokens <= 0 or counted_tokens <= 0:
        return context_state
    low, high = CALIBRATION_BOUNDS
    ratio = min(max(provider_tokens / counted_tokens, low), high)
    return {**context_state, CALIBRATION_KEY: round(ratio, 4)}


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session's transcript as the model sees it, with where each message is stored."""

    messages: list[dict[str, Any]]
    ids: list[int | None]
    """The stored message of each entry; ``None`` for the summary message."""
    token_counts: list[int]

    @property
    def tokens(self) -> int:
        """The transcript's exact size (stored counts; the summary counted on load)."""
        return sum(self.token_counts)


def build_transcript(
    rows: Sequence[Sequence[Any]], chat_session: ChatSession, counter: TokenCounter
) -> Transcript:
    """The transcript of ``rows`` (active messages in order) with the session's summary.

    Each row holds ``TRANSCRIPT_COLUMNS`` in that order (anything after them is ignored).

    The summary sits where the earliest archived message sat: after the protected head,
    before everything that came later.
    """
    messages: list[dict[str, Any]] = []
    ids: list[int | None] = []
    counts: list[int] = []
    summary = summary_message(chat_session.summary) if chat_session.summary else None
    position = (chat_session.summary_anchor_seq or 0, chat_session.summary_seq or 0)
    chat_type = chat_session.chat_type
    # Rows are TRANSCRIPT_COLUMNS, unpacked by position: this runs over the whole active
    # transcript on every turn, and named access on each row costs several times more.
    for (
        message_id,
        anchor_seq,
        seq,
        role,
        content,
        tool_calls,
        tool_call_id,
        name,
        speaker_id,
        speaker_name,
        token_count,
        *_,
    ) in rows:
        if summary is not None and (anchor_seq, seq) >= position:
            _append_summary(summary, messages, ids, counts, counter)
            summary = None
        messages.append(
            chat_message(
                role,
                content,
                tool_calls,
                tool_call_id,
                name,
                speaker_id,
                speaker_name,
                chat_type=chat_type,
            )
        )
        ids.append(int(message_id))
        counts.append(int(token_count))
    if summary is not None:
        _append_summary(summary, messages, ids, counts, counter)
    return Transcript(messages, ids, counts)


def _append_summary(
    summary: dict[str, Any],
    messages: list[dict[str, Any]],
    ids: list[int | None],
    counts: list[int],
    counter: TokenCounter,
) -> None:
    messages.append(summary)
    ids.append(None)
    counts.append(counter.count_message(summary, recurring=True))


@dataclass(frozen=True, slots=True)
class Measurements:
    """How much a compaction cost."""

    cpu_ms: float | None = None
    wall_ms: float | None = None


def apply_compaction(
    db: Session,
    chat_session: ChatSession,
    transcript: Transcript,
    result: CompressionResult,
    state: EngineState,
    *,
    trigger: str,
    counter: TokenCounter,
    focus_topic: str | None = None,
    measurements: Measurements | None = None,
    read_at: datetime | None = None,
) -> Compaction:
    """Make a compaction permanent, in place and reversibly.

    Exactly the stored messages the engine read and dropped are archived; messages that
    arrived meanwhile were not in ``transcript`` and are untouched. Pruned messages keep
    their original content in ``meta`` so the compaction can be undone.
    """
    repo = CompactionRepository.from_session(db)
    measured = measurements or Measurements()
    archived_ids = [i for i in (transcript.ids[k] for k in result.archived_indices) if i]
    compaction = repo.add(
        Compaction(
            session_id=chat_session.id,
            trigger=trigger,
            strategy=result.strategy,
            fallback_used=result.fallback_used,
            summary_model=result.summary_model,
            model_fallback_used=result.model_fallback_used,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            archived_count=len(archived_ids),
            rewritten_count=len(result.rewritten),
            summary=result.summary or "",
            summary_version=result.summary_version,
            previous_summary=chat_session.summary,
            focus_topic=focus_topic,
            summary_calls=result.summary_calls,
            max_summary_request_tokens=result.max_summary_request_tokens,
            cpu_ms=measured.cpu_ms,
            wall_ms=measured.wall_ms,
            identifiers_carried=list(result.identifiers_carried),
            identifiers_dropped=list(result.identifiers_dropped),
            restored=False,
            meta={"archived_ids": archived_ids},
        )
    )
    first = repo.earliest_position(archived_ids)
    repo.archive(archived_ids, compaction.id)
    _rewrite(repo, transcript, result, compaction.id, counter)
    current = (
        (chat_session.summary_anchor_seq, chat_session.summary_seq)
        if chat_session.summary_anchor_seq is not None and chat_session.summary_seq is not None
        else None
    )
    position = min(p for p in (first, current) if p is not None) if (first or current) else None
    if position is not None:
        chat_session.summary_anchor_seq, chat_session.summary_seq = position
    store_engine_state(chat_session, state)
    chat_session.active_tokens, chat_session.active_count = repo.recount(chat_session.id)
    # The read time, not now: messages stored while the summary was written were not
    # compacted, so a session that goes quiet right after them is still worth a look.
    chat_session.last_compacted_at = read_at or utcnow()
    db.flush()
    return compaction


def _rewrite(
    repo: CompactionRepository,
    transcript: Transcript,
    result: CompressionResult,
    compaction_id: int,
    counter: TokenCounter,
) -> None:
    targets = {transcript.ids[k]: new for k, new in result.rewritten.items() if transcript.ids[k]}
    for message in repo.messages([i for i in targets if i is not None]):
        new = targets[message.id]
        if PRE_COMPACTION_KEY not in message.meta:
            message.meta = {
                **message.meta,
                PRE_COMPACTION_KEY: {
                    "compaction_id": compaction_id,
                    "content": message.content,
                    "tool_calls": message.tool_calls,
                    "token_count": message.token_count,
                },
            }
        content = new.get("content")
        message.content = (
            content if isinstance(content, str) or content is None else json.dumps(content)
        )
        message.tool_calls = new.get("tool_calls")
        message.token_count = counter.count_message(new)
        message.compaction_id = compaction_id


def restore_latest(db: Session, chat_session: ChatSession) -> Compaction | None:
    """Undo the session's newest compaction still in effect.

    Its messages come back, pruned ones get their original text, and the summary it
    replaced is current again. Returns the compaction undone, or ``None`` when there is
    none.
    """
    repo = CompactionRepository.from_session(db)
    compaction = repo.latest_in_effect(chat_session.id)
    if compaction is None:
        return None
    for message in repo.rewritten_by(compaction.id):
        original = message.meta.get(PRE_COMPACTION_KEY)
        if original and original.get("compaction_id") == compaction.id:
            message.content = original["content"]
            message.tool_calls = original["tool_calls"]
            message.token_count = original["token_count"]
            message.meta = {k: v for k, v in message.meta.items() if k != PRE_COMPACTION_KEY}
        message.compaction_id = None
    repo.unarchive(compaction.id)
    compaction.restored = True
    state = engine_state(chat_session)
    store_engine_state(
        chat_session,
        EngineState(
            compression_count=max(state.compression_count - 1, 0),
            summary=compaction.previous_summary,
            summary_version=state.summary_version + 1,
        ),
    )
    position = repo.earliest_archived_position(chat_session.id)
    chat_session.summary_anchor_seq, chat_session.summary_seq = position or (None, None)
    chat_session.active_tokens, chat_session.active_count = repo.recount(chat_session.id)
    db.flush()
    return compaction
