"""A session as a turn or a compaction reads it: transcript, engine state, prompt, calibration."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from agent_core.compaction.service import (
    Transcript,
    build_transcript,
    engine_state,
    token_calibration,
)
from agent_core.context import EngineState
from agent_core.db.models import ChatSession
from agent_core.media.parts import with_images
from agent_core.media.repository import MediaRepository
from agent_core.sessions.repository import (
    SESSION_NUMBERS,
    TRANSCRIPT_COLUMNS,
    SessionRepository,
)
from agent_core.tokens import TokenCounter

MAX_REREADS = 3
"""Rereads of a session that keeps changing under the view before it is taken as is."""


@dataclass(frozen=True, slots=True)
class SessionView:
    """One consistent read of a session."""

    transcript: Transcript
    state: EngineState
    summary_version: int
    """Bumped by every compaction: a result computed on an older view is stale."""
    system_prompt: str | None
    calibration: float
    """Provider tokens per counted token, learned from the last response."""

    def with_appended(
        self, messages: list[dict[str, Any]], ids: list[int], token_counts: list[int]
    ) -> SessionView:
        """This view with rows just stored after everything in it (a turn's tool round).

        What a fresh read would give while no compaction committed since this one: the new
        rows are the newest in the turn's place, so they come last, after any summary.
        """
        transcript = self.transcript
        return replace(
            self,
            transcript=Transcript(
                [*transcript.messages, *messages],
                [*transcript.ids, *ids],
                [*transcript.token_counts, *token_counts],
            ),
        )


def load_view(
    db: Session,
    session_id: str,
    counter: TokenCounter,
    *,
    up_to_anchor: int | None,
    vision: bool = False,
) -> SessionView | None:
    """The session's transcript with what compaction and the turn need around it.

    Args:
        db: the unit of work.
        session_id: the session.
        counter: counts the summary message (stored messages carry their counts).
        up_to_anchor: only what a turn sees (messages at or before its own).
        vision: the model reads images: the latest user message with images carries
            them as image parts; otherwise every image is a note in the text.
    """
    # db.get: within a turn the session is already loaded, so this costs no query.
    chat_session = db.get(ChatSession, session_id)
    if chat_session is None:
        return None
    repo = SessionRepository.from_session(db)
    rows = repo.context_rows(session_id, up_to_anchor=up_to_anchor, versioned=True)
    for _ in range(MAX_REREADS):
        # The session row may be older than these rows: read in an earlier transaction (a
        # turn starts on its worker's read), or before a compaction committed (Postgres
        # reads each statement afresh). Then it is read again; when a compaction committed
        # since the rows were, they are too, so summary and rows are of one moment.
        seen = tuple(rows[0][len(TRANSCRIPT_COLUMNS) :]) if rows else None
        if seen is None or seen == tuple(getattr(chat_session, c.key) for c in SESSION_NUMBERS):
            break
        db.refresh(chat_session)
        if seen[0] == chat_session.summary_version:  # SESSION_NUMBERS begins with it
            break
        rows = repo.context_rows(session_id, up_to_anchor=up_to_anchor, versioned=True)
    transcript = build_transcript(rows, chat_session, counter)
    if chat_session.has_media:
        transcript = _with_media(db, transcript, session_id, counter, vision=vision)
    return SessionView(
        transcript=transcript,
        state=engine_state(chat_session),
        summary_version=chat_session.summary_version,
        system_prompt=chat_session.system_prompt,
        calibration=token_calibration(chat_session),
    )


def _with_media(
    db: Session, transcript: Transcript, session_id: str, counter: TokenCounter, *, vision: bool
) -> Transcript:
    """``transcript`` with the images its messages carried (see :mod:`agent_core.media.parts`)."""
    media = MediaRepository.from_session(db)
    infos = media.infos(session_id, transcript.ids)
    if not infos:
        return transcript
    messages, counts = with_images(
        transcript.messages,
        transcript.ids,
        transcript.token_counts,
        infos,
        vision=vision,
        load_blobs=media.blobs,
        counter=counter,
    )
    return Transcript(messages, transcript.ids, counts)
