"""All SQL for tenants and bots."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agent_core.db.models import DEFAULT_TENANT_ID, Bot, Tenant


class TenancyRepository:
    """Lookups and idempotent creation of tenants and bots."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> TenancyRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        """The tenant, or ``None``."""
        return self.session.get(Tenant, tenant_id)

    def ensure_default_tenant(self) -> Tenant:
        """The default tenant (the migration creates it; this heals a hand-cleared table)."""
        tenant = self.get_tenant(DEFAULT_TENANT_ID)
        if tenant is None:
            tenant = Tenant(id=DEFAULT_TENANT_ID, name="Default tenant")
            self.session.add(tenant)
            self.session.flush()
        return tenant

    def list_tenants_with_bot_counts(self) -> list[tuple[Tenant, int]]:
        """Every tenant with how many bots it owns, oldest first."""
        bots = (
            select(Bot.tenant_id, func.count(Bot.id).label("bots"))
            .group_by(Bot.tenant_id)
            .subquery()
        )
        query = (
            select(Tenant, func.coalesce(bots.c.bots, 0))
            .outerjoin(bots, bots.c.tenant_id == Tenant.id)
            .order_by(Tenant.created_at, Tenant.id)
        )
        return [(tenant, int(count)) for tenant, count in self.session.execute(query)]

    def tenant_settings(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tenant's id with its stored settings column."""
        rows = self.session.execute(select(Tenant.id, Tenant.settings).order_by(Tenant.id))
        return [(tenant_id, settings or {}) for tenant_id, settings in rows]

    def get_bot(self, bot_id: int) -> Bot | None:
        """The bot with this primary key, or ``None``."""
        return self.session.get(Bot, bot_id)

    def get_bot_by_name(self, tenant_id: str, platform: str, name: str) -> Bot | None:
        """The tenant's bot on ``platform`` called ``name``, or ``None``."""
        return self.session.scalar(
            select(Bot).where(
                Bot.tenant_id == tenant_id, Bot.platform == platform, Bot.name == name
            )
        )

    def list_bots(self, platform: str | None = None) -> list[Bot]:
        """Every bot, optionally on one platform, in creation order."""
        query = select(Bot).order_by(Bot.id)
        if platform is not None:
            query = query.where(Bot.platform == platform)
        return list(self.session.scalars(query))

    def ensure_bot(self, tenant_id: str, platform: str, name: str, **fields: Any) -> Bot:
        """The bot, created with ``fields`` when missing (safe against a concurrent creator)."""
        bot = self.get_bot_by_name(tenant_id, platform, name)
        if bot is not None:
            return bot
        try:
            with self.session.begin_nested():
                bot = Bot(tenant_id=tenant_id, platform=platform, name=name, **fields)
                self.session.add(bot)
        except IntegrityError:
            bot = self.get_bot_by_name(tenant_id, platform, name)
            assert bot is not None
        return bot
