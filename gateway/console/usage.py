"""The console's usage charts (per day, per model) and its budgets page, read from the ledger.

The same reads as the admin API's usage and budgets routes (:mod:`agent_core.usage`), on
the same days in ``HUBBUB_TIMEZONE``, for a tenant the viewer's key reaches.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from agent_core.db.engine import read_transaction
from agent_core.errors import InvalidInput
from agent_core.usage import Period, Unit
from agent_core.usage.budgets import format_amount
from agent_core.usage.periods import window
from agent_core.usage.report import total_of, usage_report
from agent_core.usage.repository import Totals, UsageRepository
from gateway.console import views
from gateway.console.access import BASE, CurrentViewer, Refused, reachable_tenant
from gateway.console.render import RuntimeDep, TenantId, page

router = APIRouter(prefix=BASE, include_in_schema=False)

MAX_DAYS = 366
"""The longest period one chart draws, a bar a day."""
WARN_SHARE, FULL_SHARE = 0.80, 1.0
"""Where a budget's gauge turns to a warning, and where calls are refused."""
Day = Annotated[str, Query(max_length=10, description="YYYY-MM-DD; empty: the default")]


def _day(text: str, name: str) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise Refused(400, f"{name!r} must be a date: YYYY-MM-DD") from exc


def _measured(totals: Totals, unit: Unit) -> float:
    return float(totals.tokens) if unit is Unit.TOKENS else totals.cost_usd


@router.get("/t/{tenant}/usage")
def usage_page(
    request: Request,
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    first_text: Annotated[str, Query(alias="from", max_length=10)] = "",
    last_text: Annotated[str, Query(alias="to", max_length=10)] = "",
    measure: Annotated[Unit, Query()] = Unit.TOKENS,
) -> HTMLResponse:
    """Tokens or cost per day and per model, from the 1st of the month to today by default."""
    found = reachable_tenant(viewer, runtime, tenant)
    budgets = runtime.usage.budgets
    today = date.fromisoformat(window(Period.DAY, budgets.clock(), budgets.timezone).label)
    last = _day(last_text, "to") or today
    first = _day(first_text, "from") or last.replace(day=1)
    if (last - first).days >= MAX_DAYS:
        raise Refused(400, f"show at most {MAX_DAYS} days at once")
    try:
        with read_transaction(runtime.factory) as db:
            per_day = dict(usage_report(db, tenant, first, last, "day", budgets.timezone))
            per_model = usage_report(db, tenant, first, last, "model", budgets.timezone)
    except InvalidInput as exc:
        raise Refused(400, str(exc)) from exc

    def show(value: float) -> str:
        return format_amount(measure, value)

    days = [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
    day_chart = views.bar_chart(
        [(d, _measured(per_day.get(d, Totals()), measure)) for d in days], show
    )
    model_chart = views.bar_chart([(k, _measured(t, measure)) for k, t in per_model], show)
    return page(
        request,
        "usage.html",
        viewer,
        tenant=found,
        section="usage",
        first=first.isoformat(),
        last=last.isoformat(),
        timezone=budgets.timezone,
        measure=measure.value,
        measures=[u.value for u in Unit],
        per_day=day_chart,
        per_model=model_chart,
        models=per_model,
        total=total_of(per_model),
    )


@router.get("/t/{tenant}/budgets")
def budgets_page(
    request: Request, viewer: CurrentViewer, runtime: RuntimeDep, tenant: TenantId
) -> HTMLResponse:
    """The tenant's budgets, with what the whole tenant used of each current period."""
    found = reachable_tenant(viewer, runtime, tenant)
    budgets = runtime.usage.budgets
    now = budgets.clock()
    with read_transaction(runtime.factory) as db:
        repo = UsageRepository.from_session(db)
        stored = repo.budgets(tenant)
        used = {
            period: repo.totals(tenant, window(period, now, budgets.timezone).start)
            for period in Period
        }
        rows = []
        for budget in stored:
            unit = Unit(budget.unit)
            spent = _measured(used[Period(budget.period)], unit)
            share = spent / budget.amount if budget.amount > 0 else FULL_SHARE
            rows.append(
                {
                    "scope": budget.scope,
                    "period": budget.period,
                    "limit": format_amount(unit, budget.amount),
                    "used": format_amount(unit, spent),
                    # Only a tenant budget is counted on the tenant's total; user and chat
                    # budgets count each person or chat on their own.
                    "gauge": round(min(share, FULL_SHARE) * 100, 1)
                    if budget.scope == "tenant"
                    else None,
                    "level": "over"
                    if share >= FULL_SHARE
                    else ("high" if share >= WARN_SHARE else "ok"),
                }
            )
    return page(
        request,
        "budgets.html",
        viewer,
        tenant=found,
        section="budgets",
        budgets=rows,
        timezone=budgets.timezone,
    )
