"""Admin API keys: random, shown once, stored as a SHA-256, scoped, revocable.

A key is ``hbk_`` followed by 32 random bytes (URL-safe base64). Its first 12 characters
are its visible prefix, stored in clear to find the row and to name the key in lists and
audit entries; the whole key is only ever compared by hash, in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import ApiKey
from agent_core.errors import InvalidInput
from agent_core.tenancy.repository import TenancyRepository

KEY_MARK = "hbk_"
PREFIX_LENGTH = 12
LAST_USED_RESOLUTION = timedelta(minutes=1)
"""``last_used_at`` is written at most this often, so reads do not all become writes."""


class Scope(StrEnum):
    """What a key may do inside its tenant(s)."""

    ADMIN = "admin"
    """Read and change."""
    READ = "read"
    """Read only: any write answers 403."""


@dataclass(frozen=True)
class CreatedKey:
    """A new key: ``secret`` is the only copy of the plaintext, show it once."""

    key: ApiKey
    secret: str


@dataclass(frozen=True)
class Caller:
    """Who a verified key speaks for."""

    prefix: str
    tenant_id: str | None
    """``None``: the operator, every tenant."""
    scope: Scope

    @property
    def is_operator(self) -> bool:
        """Whether the key reaches every tenant."""
        return self.tenant_id is None

    def reaches(self, tenant_id: str) -> bool:
        """Whether the key may see ``tenant_id`` at all."""
        return self.tenant_id is None or self.tenant_id == tenant_id


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyRepository:
    """All SQL for API keys."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> KeyRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def get_by_prefix(self, prefix: str) -> ApiKey | None:
        """The key with this visible prefix (revoked or not), or ``None``."""
        return self.session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))

    def list(self, tenant_id: str | None = None) -> list[ApiKey]:
        """Keys in creation order: one tenant's, or all (operator keys included)."""
        query = select(ApiKey).order_by(ApiKey.id)
        if tenant_id is not None:
            query = query.where(ApiKey.tenant_id == tenant_id)
        return list(self.session.scalars(query))


def create(db: Session, *, tenant_id: str | None, scope: str) -> CreatedKey:
    """A new key for ``tenant_id`` (``None``: an operator key).

    Raises:
        InvalidInput: unknown scope or tenant.
    """
    try:
        parsed = Scope(scope)
    except ValueError as exc:
        raise InvalidInput("scope must be admin or read") from exc
    if tenant_id is not None and TenancyRepository.from_session(db).get_tenant(tenant_id) is None:
        raise InvalidInput(f"no tenant {tenant_id!r}")
    secret = KEY_MARK + secrets.token_urlsafe(32)
    key = ApiKey(
        prefix=secret[:PREFIX_LENGTH], key_hash=_digest(secret), tenant_id=tenant_id, scope=parsed
    )
    db.add(key)
    db.flush()
    return CreatedKey(key=key, secret=secret)


def identify(db: Session, secret: str) -> tuple[Caller, datetime | None] | None:
    """The caller ``secret`` belongs to and when the key was last used; reads only.

    ``None`` for an unknown, wrong or revoked key.
    """
    if not secret.startswith(KEY_MARK) or len(secret) <= PREFIX_LENGTH:
        return None
    key = KeyRepository.from_session(db).get_by_prefix(secret[:PREFIX_LENGTH])
    if key is None or not hmac.compare_digest(_digest(secret), key.key_hash):
        return None
    if key.revoked_at is not None:
        return None
    return Caller(
        prefix=key.prefix, tenant_id=key.tenant_id, scope=Scope(key.scope)
    ), key.last_used_at


def caller_for_prefix(db: Session, prefix: str) -> tuple[Caller, datetime | None] | None:
    """The caller of the unrevoked key named ``prefix`` and its last use, read afresh.

    A signed-in console session holds only the prefix, never the secret, and ends once
    the key is revoked or gone (``None``).
    """
    key = KeyRepository.from_session(db).get_by_prefix(prefix)
    if key is None or key.revoked_at is not None:
        return None
    caller = Caller(prefix=key.prefix, tenant_id=key.tenant_id, scope=Scope(key.scope))
    return caller, key.last_used_at


def is_stale(last_used_at: datetime | None, now: datetime) -> bool:
    """Whether ``last_used_at`` is due to be written again."""
    return last_used_at is None or now - last_used_at >= LAST_USED_RESOLUTION


def touch(db: Session, prefix: str, now: datetime) -> None:
    """Record that the key named ``prefix`` was used at ``now``."""
    db.execute(update(ApiKey).where(ApiKey.prefix == prefix).values(last_used_at=now))


def verify(db: Session, secret: str, *, now: datetime | None = None) -> Caller | None:
    """:func:`identify`, recording the use (at most once a minute)."""
    found = identify(db, secret)
    if found is None:
        return None
    caller, last_used_at = found
    now = now or utcnow()
    if is_stale(last_used_at, now):
        touch(db, caller.prefix, now)
        db.expire_all()
    return caller


def revoke(db: Session, prefix: str, *, tenant_id: str | None = None) -> ApiKey | None:
    """Revoke the key named by ``prefix``; ``None`` when there is none (in ``tenant_id``).

    Revoking twice keeps the first revocation time.
    """
    key = KeyRepository.from_session(db).get_by_prefix(prefix)
    if key is None or (tenant_id is not None and key.tenant_id != tenant_id):
        return None
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        db.flush()
    return key


def describe(key: ApiKey) -> dict[str, object]:
    """A key as shown to people and stored in the audit log: never the hash or the secret."""
    return {
        "prefix": key.prefix,
        "tenant": key.tenant_id,
        "scope": key.scope,
        "created_at": key.created_at.isoformat() if key.created_at else None,
        "last_used_at": key.last_used_at.isoformat() if key.last_used_at else None,
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }
