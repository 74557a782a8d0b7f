"""The admin API's usage and budgets: ``/api/admin/v1/tenants/{tenant}/usage`` and ``/budgets``.

Same keys, scoping and audit as :mod:`gateway.routes.admin` (whose dependencies these
routes use): a foreign tenant is 404, a read key on ``PUT`` is 403, every change audited.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from agent_core.admin import audit
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import Budget
from agent_core.usage import BudgetSpec, Period, Scope, Unit
from agent_core.usage.periods import window
from agent_core.usage.report import GROUPINGS, total_of, usage_report
from agent_core.usage.repository import Totals, UsageRepository
from gateway.errors import documented
from gateway.routes.admin import PREFIX, Strict, TenantAccess

router = APIRouter(prefix=PREFIX, tags=["admin"], responses=documented(401, 403, 404, 422, 503))

MAX_BUDGETS = 50


class UsageTotals(BaseModel):
    """Sums over usage rows."""

    prompt_tokens: int
    completion_tokens: int
    tokens: int
    cost_usd: float
    calls: int
    unpriced_calls: int
    """Calls of models without a price, counted at $0."""


class UsageRow(UsageTotals):
    """One group: a day (``2026-12-02``), a bot id, a user id or a model."""

    key: str


class UsageOut(BaseModel):
    """A tenant's usage over whole days in the deployment's time zone."""

    from_: date = Field(alias="from")
    to: date
    timezone: str
    group_by: str
    rows: list[UsageRow]
    total: UsageTotals


class BudgetIn(Strict):
    """One budget: a limit per day or month, for the tenant, each user or each chat."""

    scope: Scope
    period: Period
    unit: Unit = Field(description="tokens (prompt plus completion) or usd")
    amount: float = Field(ge=0)


class BudgetOut(BudgetIn):
    """A stored budget."""

    id: int


class Budgets(Strict):
    """A tenant's whole set of budgets (a ``PUT`` replaces it)."""

    budgets: list[BudgetIn] = Field(max_length=MAX_BUDGETS)


class BudgetsOut(BaseModel):
    """A tenant's budgets, and the tenant-wide use of the current periods."""

    budgets: list[BudgetOut]
    tenant_used: dict[str, dict[str, float]]
    """Per period (``day``, ``month``): ``tokens`` and ``usd`` used by the whole tenant."""


def _totals(totals: Totals) -> dict[str, Any]:
    return {
        "prompt_tokens": totals.prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "tokens": totals.tokens,
        "cost_usd": totals.cost_usd,
        "calls": totals.calls,
        "unpriced_calls": totals.unpriced_calls,
    }


def _budget_out(budget: Budget) -> BudgetOut:
    return BudgetOut(
        id=budget.id,
        scope=Scope(budget.scope),
        period=Period(budget.period),
        unit=Unit(budget.unit),
        amount=budget.amount,
    )


def _described(budgets: list[Budget]) -> dict[str, Any]:
    return {"budgets": [_budget_out(b).model_dump(mode="json", exclude={"id"}) for b in budgets]}


@router.get("/tenants/{tenant}/usage", response_model_by_alias=True)
def get_usage(
    access: TenantAccess,
    from_: Annotated[
        date | None, Query(alias="from", description="first day (default: the 1st of the month)")
    ] = None,
    to: Annotated[date | None, Query(description="last day, included (default: today)")] = None,
    group_by: Annotated[str, Query(description=f"one of {', '.join(GROUPINGS)}")] = "day",
) -> UsageOut:
    """Tokens and cost of the tenant's model calls (main and summary), grouped."""
    budgets = access.runtime.usage.budgets
    today = window(Period.DAY, budgets.clock(), budgets.timezone).label
    last = to or date.fromisoformat(today)
    first = from_ or last.replace(day=1)
    with read_transaction(access.runtime.factory) as db:
        rows = usage_report(db, access.tenant_id, first, last, group_by, budgets.timezone)
    return UsageOut.model_validate(
        {
            "from": first,
            "to": last,
            "timezone": budgets.timezone,
            "group_by": group_by,
            "rows": [{"key": key} | _totals(totals) for key, totals in rows],
            "total": _totals(total_of(rows)),
        }
    )


def _budgets_out(access: TenantAccess) -> BudgetsOut:
    budgets = access.runtime.usage.budgets
    now = budgets.clock()
    with read_transaction(access.runtime.factory) as db:
        repo = UsageRepository.from_session(db)
        stored = repo.budgets(access.tenant_id)
        used = {}
        for period in Period:
            totals = repo.totals(access.tenant_id, window(period, now, budgets.timezone).start)
            used[str(period)] = {"tokens": float(totals.tokens), "usd": totals.cost_usd}
    return BudgetsOut(budgets=[_budget_out(b) for b in stored], tenant_used=used)


@router.get("/tenants/{tenant}/budgets")
def get_budgets(access: TenantAccess) -> BudgetsOut:
    """The tenant's budgets."""
    return _budgets_out(access)


@router.put("/tenants/{tenant}/budgets")
def put_budgets(access: TenantAccess, body: Budgets) -> BudgetsOut:
    """Replace the tenant's budgets (an empty list removes them all); audited."""
    specs = [BudgetSpec.parse(b.scope, b.period, b.unit, b.amount) for b in body.budgets]
    with transaction(access.runtime.factory) as db:
        repo = UsageRepository.from_session(db)
        before = _described(repo.budgets(access.tenant_id))
        kept = [
            repo.set_budget(access.tenant_id, s.scope, s.period, s.unit, s.amount).id for s in specs
        ]
        repo.remove_budgets(access.tenant_id, keep=kept)
        db.expire_all()
        after = _described(repo.budgets(access.tenant_id))
        audit.record(
            db,
            tenant_id=access.tenant_id,
            actor=access.actor,
            action="budgets.update",
            target="budgets",
            before=before,
            after=after,
        )
    return _budgets_out(access)
