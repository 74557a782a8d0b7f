"""Every query of the usage ledger, budgets and budget alerts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Row, Table, case, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from agent_core.db.base import utcnow
from agent_core.db.models import (
    Budget,
    BudgetAlert,
    BudgetLock,
    BudgetReservation,
    UsageRecord,
)


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums over ledger rows."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    unpriced_calls: int = 0
    """Calls whose model had no price (counted at cost 0)."""

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens: what token budgets count."""
        return self.prompt_tokens + self.completion_tokens


def _insert(db: Session) -> Any:
    """The dialect's ``INSERT`` (both have ``ON CONFLICT``)."""
    return _dialect_insert(db.get_bind().dialect.name)


def _dialect_insert(dialect: str) -> Any:
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


@dataclass(frozen=True, slots=True)
class Reserved:
    """Sums over the reservations still held."""

    tokens: int = 0
    cost_usd: float = 0.0


@cache
def _insert_or_nothing(dialect: str, table: Table) -> Any:
    """``INSERT … ON CONFLICT DO NOTHING RETURNING id``, built once per dialect and table.

    RETURNING, not rowcount: psycopg reports no rowcount for this statement. The values
    come as parameters, so the statement is not rebuilt (and its cache key not recomputed)
    for every model call a turn charges.
    """
    return _dialect_insert(dialect)(table).on_conflict_do_nothing().returning(table.c.id)


def _insert_ignoring_conflict(db: Session, table: Table, values: dict[str, Any]) -> bool:
    """Insert a row unless a unique key already has it; whether it was inserted."""
    statement = _insert_or_nothing(db.get_bind().dialect.name, table)
    return db.execute(statement, values).first() is not None


_SUMS = (
    func.coalesce(func.sum(UsageRecord.prompt_tokens), 0),
    func.coalesce(func.sum(UsageRecord.completion_tokens), 0),
    func.coalesce(func.sum(UsageRecord.cost_usd), 0.0),
    func.count(UsageRecord.id),
    func.coalesce(func.sum(case((UsageRecord.cost_known.is_(False), 1), else_=0)), 0),
)


def _totals(row: Sequence[Any]) -> Totals:
    return Totals(int(row[0]), int(row[1]), float(row[2]), int(row[3]), int(row[4]))


class UsageRepository:
    """Ledger rows, budgets and alerts of the unit of work ``db``."""

    def __init__(self, db: Session) -> None:
        self.db = db

    @classmethod
    def from_session(cls, db: Session) -> UsageRepository:
        """The repository of a unit of work."""
        return cls(db)

    # -- the ledger ---------------------------------------------------------------------

    def add_record(self, values: dict[str, Any]) -> bool:
        """Write one call's row; ``False`` when its ``call_key`` was already charged."""
        table = UsageRecord.__table__
        assert isinstance(table, Table)
        return _insert_ignoring_conflict(self.db, table, values)

    def totals(
        self,
        tenant_id: str,
        since: datetime,
        until: datetime | None = None,
        *,
        user_id: str | None = None,
        chat_key: str | None = None,
    ) -> Totals:
        """What the tenant (or one of its users or chats) used in ``[since, until)``."""
        query = select(*_SUMS).where(UsageRecord.tenant_id == tenant_id, UsageRecord.at >= since)
        if until is not None:
            query = query.where(UsageRecord.at < until)
        if user_id is not None:
            query = query.where(UsageRecord.user_id == user_id)
        if chat_key is not None:
            query = query.where(UsageRecord.chat_key == chat_key)
        return _totals(self.db.execute(query).one())

    def grouped(
        self, tenant_id: str, since: datetime, until: datetime, column: str
    ) -> list[tuple[Any, Totals]]:
        """Totals per value of ``column`` (``bot_id``, ``user_id``, ``model``)."""
        key = getattr(UsageRecord, column)
        query = (
            select(key, *_SUMS)
            .where(
                UsageRecord.tenant_id == tenant_id,
                UsageRecord.at >= since,
                UsageRecord.at < until,
            )
            .group_by(key)
            .order_by(key)
        )
        return [(row[0], _totals(row[1:])) for row in self.db.execute(query)]

    def calls_between(
        self, tenant_id: str, since: datetime, until: datetime
    ) -> Sequence[Row[datetime, int, int, float, bool]]:
        """The tenant's calls in ``[since, until)``, oldest first, as light rows.

        (at, prompt tokens, completion tokens, cost, priced): grouping by local day
        happens in Python, the same on both databases.
        """
        query = (
            select(
                UsageRecord.at,
                UsageRecord.prompt_tokens,
                UsageRecord.completion_tokens,
                UsageRecord.cost_usd,
                UsageRecord.cost_known,
            )
            .where(
                UsageRecord.tenant_id == tenant_id,
                UsageRecord.at >= since,
                UsageRecord.at < until,
            )
            .order_by(UsageRecord.at, UsageRecord.id)
        )
        return self.db.execute(query).all()

    # -- budgets ------------------------------------------------------------------------

    def budgets(self, tenant_id: str | None = None) -> list[Budget]:
        """The tenant's budgets (every tenant's when ``None``), in a stable order."""
        query = select(Budget).order_by(Budget.tenant_id, Budget.scope, Budget.period, Budget.unit)
        if tenant_id is not None:
            query = query.where(Budget.tenant_id == tenant_id)
        return list(self.db.scalars(query))

    def set_budget(
        self, tenant_id: str, scope: str, period: str, unit: str, amount: float
    ) -> Budget:
        """Create the budget or change its amount (one per scope, period and unit)."""
        existing = self.db.scalars(
            select(Budget).where(
                Budget.tenant_id == tenant_id,
                Budget.scope == scope,
                Budget.period == period,
                Budget.unit == unit,
            )
        ).one_or_none()
        if existing is not None:
            existing.amount = amount
            self.db.flush()
            return existing
        budget = Budget(tenant_id=tenant_id, scope=scope, period=period, unit=unit, amount=amount)
        self.db.add(budget)
        self.db.flush()
        return budget

    def remove_budgets(self, tenant_id: str, keep: Iterable[int] = ()) -> None:
        """Remove the tenant's budgets except those with the ids in ``keep``."""
        statement = delete(Budget).where(Budget.tenant_id == tenant_id)
        kept = list(keep)
        if kept:
            statement = statement.where(Budget.id.not_in(kept))
        self.db.execute(statement)

    def add_alert(self, budget_id: int, subject: str, period_label: str, level: int) -> bool:
        """Note a warning as given; ``False`` when it had been given already."""
        table = BudgetAlert.__table__
        assert isinstance(table, Table)
        return _insert_ignoring_conflict(
            self.db,
            table,
            {
                "budget_id": budget_id,
                "subject": subject,
                "period_label": period_label,
                "level": level,
                "at": utcnow(),
            },
        )

    # -- reservations -------------------------------------------------------------------

    def lock_tenant(self, tenant_id: str, now: datetime) -> None:
        """Take the tenant's budget lock until the unit of work ends.

        An upsert, so the first statement writes: Postgres holds the row lock, SQLite the
        database's write lock, and a second reserver of the tenant waits for the commit.
        """
        table = BudgetLock.__table__
        statement = (
            _insert(self.db)(table)
            .values(tenant_id=tenant_id, touched_at=now)
            .on_conflict_do_update(index_elements=["tenant_id"], set_={"touched_at": now})
        )
        self.db.execute(statement)

    def reserved(
        self,
        tenant_id: str,
        now: datetime,
        *,
        user_id: str | None = None,
        chat_key: str | None = None,
    ) -> Reserved:
        """What the tenant's (or one user's or chat's) unexpired reservations hold."""
        query = select(
            func.coalesce(func.sum(BudgetReservation.tokens), 0),
            func.coalesce(func.sum(BudgetReservation.cost_usd), 0.0),
        ).where(BudgetReservation.tenant_id == tenant_id, BudgetReservation.expires_at > now)
        if user_id is not None:
            query = query.where(BudgetReservation.user_id == user_id)
        if chat_key is not None:
            query = query.where(BudgetReservation.chat_key == chat_key)
        row = self.db.execute(query).one()
        return Reserved(int(row[0]), float(row[1]))

    def replace_reservation(self, values: dict[str, Any]) -> None:
        """Hold a reservation, replacing the holder's previous one (a rerun's or last call's)."""
        self.remove_reservation(values["holder"])
        self.db.add(BudgetReservation(**values))
        self.db.flush()

    def remove_reservation(self, holder: str) -> bool:
        """Drop the holder's reservation; whether it held one."""
        statement = (
            delete(BudgetReservation)
            .where(BudgetReservation.holder == holder)
            .returning(BudgetReservation.id)
        )
        return self.db.execute(statement).first() is not None

    def remove_expired_reservations(self, tenant_id: str, now: datetime) -> int:
        """Drop the tenant's reservations whose holder died; how many."""
        statement = (
            delete(BudgetReservation)
            .where(BudgetReservation.tenant_id == tenant_id, BudgetReservation.expires_at <= now)
            .returning(BudgetReservation.id)
        )
        return len(self.db.execute(statement).all())
