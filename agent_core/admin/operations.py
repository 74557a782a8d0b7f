"""The admin writes shared by the API and the console, each with its audit event.

Both front ends call these inside their own transaction, so a change and the event that
describes it commit together, whichever way the operator made it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_core.admin import audit, keys
from agent_core.admin.repository import AdminRepository
from agent_core.compaction.service import restore_latest
from agent_core.db.base import utcnow
from agent_core.db.models import ApiKey
from agent_core.sessions.service import Conversation, start_new_session


@dataclass(frozen=True)
class Restored:
    """What a restore undid: ``compaction_id`` is ``None`` when there was nothing to undo."""

    compaction_id: int | None
    messages_back: int


def restore_compaction(
    db: Session, *, tenant_id: str, session_id: str, actor: str
) -> Restored | None:
    """Undo the session's newest compaction, audited; ``None``: the tenant has no such session."""
    found = AdminRepository.from_session(db).session_of(tenant_id, session_id, for_update=True)
    if found is None:
        return None
    undone = restore_latest(db, found)
    if undone is None:
        return Restored(compaction_id=None, messages_back=0)
    result = Restored(compaction_id=undone.id, messages_back=undone.archived_count)
    audit.record(
        db,
        tenant_id=tenant_id,
        actor=actor,
        action="session.restore",
        target=f"session:{session_id}",
        before={"compaction_id": undone.id},
        after={"compaction_id": result.compaction_id, "messages_back": result.messages_back},
    )
    return result


def new_session(db: Session, *, tenant_id: str, session_id: str, actor: str) -> str | None:
    """``/new`` for the session's chat, audited: the id of the fresh session that is now current.

    The named session is kept with its transcript (as ``/new`` in the chat keeps it); if it
    was not the chat's current session any more, the current one is the one ended.
    ``None``: the tenant has no such session.
    """
    found = AdminRepository.from_session(db).session_of(tenant_id, session_id, for_update=True)
    if found is None:
        return None
    if found.is_current:
        found.is_current = False
        found.ended_at = utcnow()
        db.flush()
    fresh = start_new_session(
        db,
        Conversation(
            tenant_id=found.tenant_id,
            bot_id=found.bot_id,
            platform=found.platform,
            chat_id=found.chat_id,
            thread_id=found.thread_id,
            chat_type=found.chat_type,
        ),
    )
    audit.record(
        db,
        tenant_id=tenant_id,
        actor=actor,
        action="session.new",
        target=f"session:{session_id}",
        before={"session_id": session_id},
        after={"session_id": fresh.id},
    )
    return fresh.id


def create_key(db: Session, *, tenant_id: str, scope: str, actor: str) -> keys.CreatedKey:
    """A new key for the tenant, audited (never with its secret).

    Raises:
        InvalidInput: unknown scope or tenant.
    """
    created = keys.create(db, tenant_id=tenant_id, scope=scope)
    audit.record(
        db,
        tenant_id=tenant_id,
        actor=actor,
        action="key.create",
        target=created.key.prefix,
        after=keys.describe(created.key),
    )
    return created


def revoke_key(db: Session, *, tenant_id: str, prefix: str, actor: str) -> ApiKey | None:
    """Revoke one of the tenant's keys, audited; ``None`` when the tenant has no such key."""
    key = keys.KeyRepository.from_session(db).get_by_prefix(prefix)
    if key is None or key.tenant_id != tenant_id:
        return None
    before = keys.describe(key)
    keys.revoke(db, prefix, tenant_id=tenant_id)
    audit.record(
        db,
        tenant_id=tenant_id,
        actor=actor,
        action="key.revoke",
        target=prefix,
        before=before,
        after=keys.describe(key),
    )
    return key
