"""The audit log: one event per change, with the values before and after, secrets removed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_core.db.models import AuditEvent

CLI_ACTOR = "cli"
SECRET_FIELDS = frozenset(
    {"credentials", "secrets", "token", "webhook_secret", "signing_secret", "app_token", "key_hash"}
)
"""Fields never written to the log, at any depth."""


def scrub(value: Any) -> Any:
    """``value`` with every secret field replaced by a marker."""
    if isinstance(value, dict):
        return {k: ("[removed]" if k in SECRET_FIELDS else scrub(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def record(
    db: Session,
    *,
    tenant_id: str | None,
    actor: str,
    action: str,
    target: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """Add one event to the unit of work (it commits with the change it describes)."""
    event = AuditEvent(
        tenant_id=tenant_id,
        actor=actor,
        action=action,
        target=target,
        before=scrub(before) if before is not None else None,
        after=scrub(after) if after is not None else None,
    )
    db.add(event)
    db.flush()
    return event


def list_for_tenant(db: Session, tenant_id: str, *, limit: int = 200) -> list[AuditEvent]:
    """The tenant's events, newest first."""
    return list(
        db.scalars(
            select(AuditEvent)
            .where(AuditEvent.tenant_id == tenant_id)
            .order_by(AuditEvent.at.desc(), AuditEvent.id.desc())
            .limit(limit)
        )
    )
