"""The admin writes shared by the API and the console, each with its audit event.

Both front ends call these inside their own transaction, so a change and the event that
describes it commit together, whichever way the operator made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from agent_core.admin import audit, keys
from agent_core.admin.repository import AdminRepository
from agent_core.compaction.service import restore_latest
from agent_core.config import CompressionSettings
from agent_core.db.base import utcnow
from agent_core.db.models import ApiKey, Tenant
from agent_core.errors import InvalidInput
from agent_core.sessions.service import Conversation, start_new_session
from agent_core.tenancy.settings import (
    TenantDefaults,
    check_compression_thresholds,
    check_models,
    check_tool_patterns,
    check_trigger_mode,
)


@dataclass(frozen=True)
class Restored:
    """What a restore undid: ``compaction_id`` is ``None`` when there was nothing to undo."""

    compaction_id: int | None
    messages_back: int


@dataclass(frozen=True)
class TenantSettingsChange:
    """A tenant's settings as a whole: what ``PUT settings`` and the console's form send."""

    name: str
    persona: str | None
    stored: TenantDefaults


def describe_settings(tenant: Tenant) -> dict[str, Any]:
    """A tenant's settings as the API shows them and the audit log records them."""
    stored = TenantDefaults.from_json(tenant.settings)
    return {
        "name": tenant.name,
        "persona": tenant.persona,
        "instructions": stored.instructions,
        "trigger_mode": stored.trigger_mode,
        "busy_mode": stored.busy_mode,
        "allow_users": list(stored.allow_users) if stored.allow_users else None,
        "allow_chats": list(stored.allow_chats) if stored.allow_chats else None,
        "tools": list(stored.tools) if stored.tools else None,
        # -- compression thresholds (hosted) --
        "compression_threshold": stored.compression_threshold,
        "hygiene_threshold": stored.hygiene_threshold,
        # -- models (hosted) --
        "models": list(stored.models) if stored.models else None,
        "default_model": stored.default_model,
    }


def update_settings(
    db: Session,
    *,
    tenant_id: str,
    change: TenantSettingsChange,
    deployment: CompressionSettings,
    offered_models: Sequence[str],
    actor: str,
) -> Tenant | None:
    """Replace the tenant's settings, audited; ``None``: no such tenant.

    ``deployment`` is what an unset compression threshold falls back to, so the pair
    that would run is checked; ``offered_models`` (``HUBBUB_MODELS``) bounds the tenant's.

    Raises:
        InvalidInput: a setting breaks its rule; nothing changed.
    """
    stored = change.stored
    if not change.name.strip():
        raise InvalidInput("name must not be empty")
    check_trigger_mode(stored.trigger_mode)
    check_tool_patterns(stored.tools)
    check_compression_thresholds(stored.compression_threshold, stored.hygiene_threshold, deployment)
    check_models(stored.models, stored.default_model, offered_models)
    tenant = db.get(Tenant, tenant_id)
    if tenant is None:
        return None
    before = describe_settings(tenant)
    tenant.name, tenant.persona = change.name, change.persona
    tenant.settings = stored.to_json()
    db.flush()
    audit.record(
        db,
        tenant_id=tenant_id,
        actor=actor,
        action="settings.update",
        target=tenant_id,
        before=before,
        after=describe_settings(tenant),
    )
    return tenant


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
