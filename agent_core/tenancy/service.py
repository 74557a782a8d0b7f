"""Create and remove tenants and database-configured bots (credentials sealed at rest)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from agent_core.crypto import CredentialBox
from agent_core.db.models import Bot, Tenant
from agent_core.errors import InvalidInput
from agent_core.tenancy.names import check_name
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tenancy.settings import TRIGGER_MODES, check_busy_mode, check_trigger_mode

PLATFORMS = ("telegram", "discord", "slack")
__all__ = [
    "PLATFORMS",
    "TRIGGER_MODES",
    "add_bot",
    "add_tenant",
    "remove_bot",
    "set_busy_mode",
]


def add_tenant(db: Session, tenant_id: str, *, name: str | None, persona: str | None) -> Tenant:
    """Create a tenant.

    Raises:
        InvalidInput: the id is taken or malformed.
    """
    check_name("tenant id", tenant_id)
    repo = TenancyRepository.from_session(db)
    if repo.get_tenant(tenant_id) is not None:
        raise InvalidInput(f"tenant {tenant_id!r} exists already")
    tenant = Tenant(id=tenant_id, name=name or tenant_id, persona=persona)
    db.add(tenant)
    db.flush()
    return tenant


def add_bot(
    db: Session,
    box: CredentialBox,
    *,
    tenant_id: str,
    platform: str,
    name: str,
    secrets: dict[str, str],
    options: dict[str, Any],
    trigger_mode: str | None = None,
    answer_bots: bool = False,
    busy_mode: str | None = None,
) -> Bot:
    """Create a bot whose credentials live in the database, sealed with the secret key.

    Raises:
        InvalidInput: unknown platform, tenant, trigger mode or busy mode; a missing token; a name
            that breaks the rule (``agent_core.tenancy.names``) or is already used on that
            platform by the tenant.
    """
    check_name("bot name", name)
    if platform not in PLATFORMS:
        raise InvalidInput(f"platform must be one of {', '.join(PLATFORMS)}")
    check_trigger_mode(trigger_mode)
    check_busy_mode(busy_mode)
    if not secrets.get("token"):
        raise InvalidInput("a bot needs its platform token")
    repo = TenancyRepository.from_session(db)
    if repo.get_tenant(tenant_id) is None:
        raise InvalidInput(f"no tenant {tenant_id!r}: create it first")
    if repo.get_bot_by_name(tenant_id, platform, name) is not None:
        raise InvalidInput(f"tenant {tenant_id!r} has a {platform} bot {name!r} already")
    bot = Bot(
        tenant_id=tenant_id,
        platform=platform,
        name=name,
        trigger_mode=trigger_mode,
        busy_mode=busy_mode,
        answer_bots=answer_bots,
        credentials=box.seal({k: v for k, v in secrets.items() if v}),
        settings={k: v for k, v in options.items() if v not in (None, "", [], ())},
    )
    db.add(bot)
    db.flush()
    return bot


def set_busy_mode(
    db: Session, *, tenant_id: str, platform: str, name: str, mode: str | None
) -> Bot | None:
    """Set a bot's busy mode (``None``: inherit the tenant's); ``None`` when no such bot.

    Read by the next drain of each of its sessions: no restart needed.

    Raises:
        InvalidInput: the mode is not a busy mode.
    """
    check_busy_mode(mode)
    bot = TenancyRepository.from_session(db).get_bot_by_name(tenant_id, platform, name)
    if bot is None:
        return None
    bot.busy_mode = mode
    db.flush()
    return bot


def remove_bot(db: Session, *, tenant_id: str, platform: str, name: str) -> bool:
    """Delete a bot and everything said to it; ``False`` when there is no such bot."""
    bot = TenancyRepository.from_session(db).get_bot_by_name(tenant_id, platform, name)
    if bot is None:
        return False
    db.delete(bot)
    db.flush()
    return True
