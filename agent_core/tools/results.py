"""Stored tool results: the repository, and the store the ladder spills into."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_core.db.models import StoredToolResult

REF_PREFIX = "tr_"


def new_ref() -> str:
    """An unguessable reference (128 bits of randomness)."""
    return REF_PREFIX + secrets.token_urlsafe(16)


class ToolResultRepository:
    """All SQL for stored tool results; never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> ToolResultRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def add(
        self, *, tenant_id: str, session_id: str, tool_call_id: str, tool_name: str, content: str
    ) -> str:
        """Store one result; returns its ref."""
        ref = new_ref()
        self.session.add(
            StoredToolResult(
                ref=ref,
                tenant_id=tenant_id,
                session_id=session_id,
                tool_call_id=tool_call_id[:128],
                tool_name=tool_name[:128],
                content=content,
                chars=len(content),
            )
        )
        self.session.flush()
        return ref

    def get(self, ref: str, *, tenant_id: str, session_id: str) -> StoredToolResult | None:
        """The result behind ``ref`` if it belongs to this session of this tenant."""
        return self.session.scalar(
            select(StoredToolResult).where(
                StoredToolResult.ref == ref,
                StoredToolResult.session_id == session_id,
                StoredToolResult.tenant_id == tenant_id,
            )
        )


class DatabaseResultStore:
    """The ladder's store, writing in the caller's unit of work (atomic with the transcript)."""

    def __init__(self, db: Session, *, tenant_id: str, session_id: str) -> None:
        self._repo = ToolResultRepository.from_session(db)
        self._tenant_id = tenant_id
        self._session_id = session_id

    def put(self, *, tool_call_id: str, tool_name: str, content: str) -> str:
        """Store ``content`` for this session; returns the ref."""
        return self._repo.add(
            tenant_id=self._tenant_id,
            session_id=self._session_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            content=content,
        )
