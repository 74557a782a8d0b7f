"""Full-text search over what a chat said before: its archived turns and earlier sessions.

The search never leaves one conversation key (tenant, bot, platform, chat, thread), so it
cannot surface another chat's or tenant's words. Postgres matches an expression GIN index
on ``to_tsvector('simple', ...)``; SQLite an FTS5 external-content table kept in sync by
triggers (both created by migration ``0008_g_tools``; since ``0023_y_search_what_was_said``
both hold user and assistant messages only, all that is searched). Words that look like identifiers
(``0x7ffd3a2c``, ``build/x.tar.gz``, ``ERR-4411``, ``liveCD``) are also matched verbatim,
case included, because the tokenizers split, mangle or case-fold them, and such hits rank
first: in a chat that says ``livecd`` hundreds of times, ``liveCD`` is a different word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    column,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
)
from sqlalchemy.orm import Session

from agent_core.context.identifiers import find_identifiers
from agent_core.db.matching import holds_exactly
from agent_core.db.models import ChatSession, Message, MessageKind

MAX_TERMS = 16
SNIPPET_RADIUS = 90
_IDENTIFIER = re.compile(r"[^\w\s]|_|\d")
_PG_VECTOR: ColumnElement[Any] = literal_column(
    "to_tsvector('simple', coalesce(messages.content, ''))"
)
"""Exactly the indexed expression: anything else makes Postgres scan the table."""
_PG_CONFIG: ColumnElement[Any] = literal_column("'simple'::regconfig")
SAID: ColumnElement[bool] = Message.role.in_(
    [literal(role, literal_execute=True) for role in ("user", "assistant")]
)
"""What people and the bot said: all that is searched, and all that the index holds (its
predicate, which Postgres matches only against literal values, even in a generic plan)."""
_FTS5: ColumnElement[Any] = literal_column("messages_fts")
_FTS5_TABLE = table("messages_fts", column("rowid"))


@dataclass(frozen=True, slots=True)
class FoundMessage:
    """A message of the chat's past, as search and recall return it."""

    message_id: int
    session_id: str
    role: str
    speaker: str
    created_at: datetime
    content: str
    archived: bool
    current_session: bool


def query_terms(query: str) -> list[str]:
    """The words of a query that can match anything (at most :data:`MAX_TERMS`)."""
    return [w for w in query.split() if any(c.isalnum() for c in w)][:MAX_TERMS]


def is_identifier(word: str) -> bool:
    """Whether a word needs verbatim matching (punctuation, digits or underscores in it)."""
    return len(word) >= 3 and bool(_IDENTIFIER.search(word))


def verbatim_terms(query: str) -> list[str]:
    """What of a query is matched character for character, most wanted first.

    A query of several words as a whole (the ledger carries code spans such as
    ``ls /media``, and a phrase said exactly is the best hit), then the identifiers the
    ledger would extract (so ``liveCD`` or ``macOS``, which a word-level test cannot tell
    from prose), then any other word with punctuation, digits or underscores (``deploy*``
    is still looked for as written).
    """
    phrase = " ".join(query.split())
    found = [phrase] if " " in phrase else []
    found += [value for _kind, value in find_identifiers(query)]
    found += [w for w in query_terms(query) if is_identifier(w)]
    return list(dict.fromkeys(found))[:MAX_TERMS]


def snippet(content: str, terms: Sequence[str], radius: int = SNIPPET_RADIUS) -> str:
    """The part of ``content`` around a term, the term whole.

    The first of ``terms`` (most wanted first) that ``content`` holds as written wins over
    any that matches only case-folded, so a search for ``liveCD`` shows that word and not
    the ``LiveCD`` before it.
    """
    exact = next(((p, len(t)) for t in terms if (p := content.find(t)) >= 0), None)
    if exact is not None:
        found = [exact]
    else:
        folded = content.casefold()
        found = [(p, len(t)) for t in terms if (p := folded.find(t.casefold())) >= 0]
    if not found:
        return content[: radius * 2] + ("…" if len(content) > radius * 2 else "")
    first, length = min(found)
    # The term itself is always whole: a long URL or hash cut in the snippet is no hit.
    start = max(0, first - radius)
    end = min(len(content), first + length + radius)
    return ("…" if start else "") + content[start:end] + ("…" if end < len(content) else "")


class ArchiveSearch:
    """Search and recall over one chat's past; never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._dialect = session.get_bind().dialect.name

    @classmethod
    def from_session(cls, session: Session) -> ArchiveSearch:
        """The search bound to a unit of work."""
        return cls(session)

    def _base(self, tenant_id: str, key: str) -> Select[Message, bool]:
        return (
            select(Message, ChatSession.is_current)
            .join(ChatSession, ChatSession.id == Message.session_id)
            .where(
                ChatSession.tenant_id == tenant_id,
                ChatSession.key == key,
                Message.kind == MessageKind.CHAT,
                Message.deleted.is_(False),
                SAID,
                Message.content.is_not(None),
            )
        )

    @staticmethod
    def _past(current_session_id: str) -> ColumnElement[bool]:
        """Archived turns of the current session, and everything of earlier sessions."""
        return or_(Message.archived.is_(True), Message.session_id != current_session_id)

    def search(
        self, *, tenant_id: str, key: str, current_session_id: str, query: str, limit: int
    ) -> list[FoundMessage]:
        """The best matches for ``query``: verbatim identifier hits first, then by rank."""
        terms = query_terms(query)
        if not terms:
            return []
        found: dict[int, FoundMessage] = {}
        base = self._base(tenant_id, key).where(self._past(current_session_id))
        for word in verbatim_terms(query):
            for message, current in self.session.execute(
                base.where(holds_exactly(Message.content, word, self._dialect))
                .order_by(Message.created_at.desc(), Message.id.desc())
                .limit(limit)
            ):
                if message.id not in found:
                    found[message.id] = _found(message, current)
            if len(found) >= limit:
                return list(found.values())[:limit]
        for message, current in self.session.execute(self._ranked(base, terms, limit * 2)):
            if message.id not in found:
                found[message.id] = _found(message, current)
            if len(found) >= limit:
                break
        return list(found.values())[:limit]

    def _ranked(
        self, base: Select[Message, bool], terms: list[str], limit: int
    ) -> Select[Message, bool]:
        """``base`` narrowed to full-text matches of any term, best first."""
        if self._dialect == "postgresql":
            parts = [
                func.phraseto_tsquery(_PG_CONFIG, bindparam(f"term_{i}", term))
                for i, term in enumerate(terms)
            ]
            tsquery: ColumnElement[Any] = parts[0]
            for part in parts[1:]:
                tsquery = tsquery.op("||")(part)
            return (
                base.where(_PG_VECTOR.op("@@")(tsquery))
                .order_by(func.ts_rank_cd(_PG_VECTOR, tsquery).desc(), Message.id.desc())
                .limit(limit)
            )
        # Each word is one quoted FTS5 string (a phrase of its tokens): no operator injection.
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        return (
            base.join(_FTS5_TABLE, _FTS5_TABLE.c.rowid == Message.id)
            .where(_FTS5.op("MATCH")(bindparam("fts_query", match)))
            .order_by(func.bm25(_FTS5), Message.id.desc())
            .limit(limit)
        )

    def around(
        self, *, tenant_id: str, key: str, message_id: int, before: int, after: int
    ) -> list[FoundMessage] | None:
        """The message and its neighbours in its session, verbatim; ``None`` if not this chat's."""
        row = self.session.execute(
            self._base(tenant_id, key).where(Message.id == message_id)
        ).first()
        if row is None:
            return None
        target: Message = row[0]
        in_session = self._base(tenant_id, key).where(Message.session_id == target.session_id)
        position = (Message.anchor_seq, Message.seq)
        earlier = self.session.execute(
            in_session.where(
                or_(
                    Message.anchor_seq < target.anchor_seq,
                    and_(Message.anchor_seq == target.anchor_seq, Message.seq < target.seq),
                )
            )
            .order_by(*(c.desc() for c in position))
            .limit(before)
        ).all()
        later = self.session.execute(
            in_session.where(
                or_(
                    Message.anchor_seq > target.anchor_seq,
                    and_(Message.anchor_seq == target.anchor_seq, Message.seq > target.seq),
                )
            )
            .order_by(*position)
            .limit(after)
        ).all()
        rows = [*reversed(earlier), row, *later]
        return [_found(message, current) for message, current in rows]


def _found(message: Message, current: bool) -> FoundMessage:
    speaker = message.speaker_name or message.speaker_id or "someone"
    return FoundMessage(
        message_id=message.id,
        session_id=message.session_id,
        role=message.role,
        speaker="assistant (you)" if message.role == "assistant" else speaker,
        created_at=message.created_at,
        content=message.content or "",
        archived=message.archived,
        current_session=bool(current),
    )
