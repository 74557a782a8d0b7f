"""All SQL for compactions and the archive."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from agent_core.db.matching import holds_exactly
from agent_core.db.models import Compaction, Message, MessageKind


class CompactionRepository:
    """Compaction records and archive moves; never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> CompactionRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def add(self, compaction: Compaction) -> Compaction:
        """Store a compaction record (its id is set on return)."""
        self.session.add(compaction)
        self.session.flush()
        return compaction

    def list_for_session(self, session_id: str) -> list[Compaction]:
        """The session's compactions, oldest first."""
        return list(
            self.session.scalars(
                select(Compaction)
                .where(Compaction.session_id == session_id)
                .order_by(Compaction.id)
            )
        )

    def latest_in_effect(self, session_id: str) -> Compaction | None:
        """The newest compaction that has not been undone."""
        return self.session.scalar(
            select(Compaction)
            .where(Compaction.session_id == session_id, Compaction.restored.is_(False))
            .order_by(Compaction.id.desc())
            .limit(1)
        )

    def messages(self, ids: Sequence[int]) -> list[Message]:
        """Messages by id (any order)."""
        if not ids:
            return []
        return list(self.session.scalars(select(Message).where(Message.id.in_(ids))))

    def earliest_position(self, ids: Sequence[int]) -> tuple[int, int] | None:
        """The smallest (anchor_seq, seq) among the messages."""
        if not ids:
            return None
        row = self.session.execute(
            select(Message.anchor_seq, Message.seq)
            .where(Message.id.in_(ids))
            .order_by(Message.anchor_seq, Message.seq)
            .limit(1)
        ).first()
        return (int(row[0]), int(row[1])) if row is not None else None

    def earliest_archived_position(self, session_id: str) -> tuple[int, int] | None:
        """Where the first archived message of the session sits."""
        row = self.session.execute(
            select(Message.anchor_seq, Message.seq)
            .where(Message.session_id == session_id, Message.archived.is_(True))
            .order_by(Message.anchor_seq, Message.seq)
            .limit(1)
        ).first()
        return (int(row[0]), int(row[1])) if row is not None else None

    def archive(self, ids: Sequence[int], compaction_id: int) -> int:
        """Archive active messages; returns how many (already archived ones are skipped)."""
        if not ids:
            return 0
        result = self.session.execute(
            update(Message)
            .where(Message.id.in_(ids), Message.archived.is_(False))
            .values(archived=True, compaction_id=compaction_id)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    def unarchive(self, compaction_id: int) -> int:
        """Bring back the messages a compaction archived."""
        result = self.session.execute(
            update(Message)
            .where(Message.compaction_id == compaction_id, Message.archived.is_(True))
            .values(archived=False, compaction_id=None)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    def rewritten_by(self, compaction_id: int) -> list[Message]:
        """Active messages whose content a compaction pruned."""
        return list(
            self.session.scalars(
                select(Message).where(
                    Message.compaction_id == compaction_id, Message.archived.is_(False)
                )
            )
        )

    def archived(self, session_id: str, *, compaction_id: int | None = None) -> list[Message]:
        """The session's archived messages in transcript order (optionally of one compaction)."""
        query = select(Message).where(Message.session_id == session_id, Message.archived.is_(True))
        if compaction_id is not None:
            query = query.where(Message.compaction_id == compaction_id)
        return list(self.session.scalars(query.order_by(Message.anchor_seq, Message.seq)))

    def search_archive(self, session_id: str, text: str, *, limit: int = 50) -> list[Message]:
        """Archived messages containing ``text`` exactly (case included), newest first."""
        dialect = self.session.get_bind().dialect.name
        return list(
            self.session.scalars(
                select(Message)
                .where(
                    Message.session_id == session_id,
                    Message.archived.is_(True),
                    holds_exactly(Message.content, text, dialect),
                )
                .order_by(Message.anchor_seq.desc(), Message.seq.desc())
                .limit(limit)
            )
        )

    def recount(self, session_id: str) -> tuple[int, int]:
        """Exact (tokens, messages) of the session's active chat transcript."""
        row = self.session.execute(
            select(func.coalesce(func.sum(Message.token_count), 0), func.count(Message.id)).where(
                Message.session_id == session_id,
                Message.archived.is_(False),
                Message.deleted.is_(False),
                Message.kind == MessageKind.CHAT,
            )
        ).one()
        return int(row[0]), int(row[1])
