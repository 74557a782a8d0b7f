"""``hubbub budgets set|list|remove`` and ``hubbub usage``: budgets and usage from the shell.

Changes are audited like the admin API's (actor ``cli``).
"""

from __future__ import annotations

from datetime import date
from typing import Annotated

import typer
from sqlalchemy.orm import Session, sessionmaker

from agent_core.admin import audit
from agent_core.config import Settings
from agent_core.db.engine import (
    create_db_engine,
    make_session_factory,
    read_transaction,
    transaction,
)
from agent_core.db.models import Budget, Tenant
from agent_core.errors import InvalidInput
from agent_core.usage import BudgetSpec, Period, Unit
from agent_core.usage.budgets import format_amount
from agent_core.usage.periods import SYSTEM_CLOCK, window
from agent_core.usage.report import GROUPINGS, total_of, usage_report
from agent_core.usage.repository import Totals, UsageRepository

budgets = typer.Typer(help="Limit what a tenant, each of its users or each chat spends.")


def _factory(settings: Settings) -> sessionmaker[Session]:
    return make_session_factory(create_db_engine(settings.resolved_database_url))


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.secho(message, fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def _describe(budget: Budget) -> dict[str, object]:
    return {
        "scope": budget.scope,
        "period": budget.period,
        "unit": budget.unit,
        "amount": budget.amount,
    }


def _line(budget: Budget) -> str:
    amount = format_amount(Unit(budget.unit), budget.amount)
    return f"{budget.tenant_id}  {budget.scope}  {budget.period}  {amount}"


def _tenant_or_exit(db: Session, tenant: str) -> None:
    if db.get(Tenant, tenant) is None:
        raise _fail(f"No tenant {tenant!r} (hubbub tenants list shows them).", 1)


Tenant_ = Annotated[str, typer.Option("--tenant", help="The tenant.")]
ScopeOption = Annotated[str, typer.Option(help="tenant (all of it), user (each) or chat (each).")]
PeriodOption = Annotated[str, typer.Option(help="day or month (in HUBBUB_TIMEZONE).")]


@budgets.command("set")
def set_budget(
    ctx: typer.Context,
    tenant: Tenant_,
    scope: ScopeOption,
    period: PeriodOption,
    tokens: Annotated[int | None, typer.Option(help="Limit in tokens.")] = None,
    usd: Annotated[float | None, typer.Option(help="Limit in US dollars.")] = None,
) -> None:
    """Set (or change) one budget: --tokens N or --usd X per --period."""
    if (tokens is None) == (usd is None):
        raise _fail("Give either --tokens N or --usd X.")
    unit, amount = (Unit.TOKENS, float(tokens)) if tokens is not None else (Unit.USD, usd or 0.0)
    try:
        spec = BudgetSpec.parse(scope, period, unit, amount)
    except InvalidInput as exc:
        raise _fail(str(exc)) from exc
    with transaction(_factory(ctx.obj)) as db:
        _tenant_or_exit(db, tenant)
        repo = UsageRepository.from_session(db)
        before = [_describe(b) for b in repo.budgets(tenant)]
        budget = repo.set_budget(tenant, spec.scope, spec.period, spec.unit, spec.amount)
        audit.record(
            db,
            tenant_id=tenant,
            actor=audit.CLI_ACTOR,
            action="budgets.update",
            target="budgets",
            before={"budgets": before},
            after={"budgets": [_describe(b) for b in repo.budgets(tenant)]},
        )
        typer.echo(f"Budget set: {_line(budget)}")


@budgets.command("list")
def list_budgets(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's budgets.")] = None,
) -> None:
    """Every budget (tenant, scope, period, amount)."""
    with read_transaction(_factory(ctx.obj)) as db:
        found = UsageRepository.from_session(db).budgets(tenant)
        for budget in found:
            typer.echo(_line(budget))
    if not found:
        typer.echo("No budgets are set.")


@budgets.command("remove")
def remove_budget(
    ctx: typer.Context,
    tenant: Tenant_,
    scope: ScopeOption,
    period: PeriodOption,
    unit: Annotated[str, typer.Option(help="tokens or usd.")],
) -> None:
    """Remove one budget."""
    with transaction(_factory(ctx.obj)) as db:
        _tenant_or_exit(db, tenant)
        repo = UsageRepository.from_session(db)
        current = repo.budgets(tenant)
        keep = [b for b in current if (b.scope, b.period, b.unit) != (scope, period, unit)]
        if len(keep) == len(current):
            raise _fail("No such budget (hubbub budgets list shows them).", 1)
        repo.remove_budgets(tenant, keep=[b.id for b in keep])
        audit.record(
            db,
            tenant_id=tenant,
            actor=audit.CLI_ACTOR,
            action="budgets.update",
            target="budgets",
            before={"budgets": [_describe(b) for b in current]},
            after={"budgets": [_describe(b) for b in keep]},
        )
    typer.echo(f"Budget removed: {tenant} {scope} {period} {unit}.")


def _row(key: str, totals: Totals) -> str:
    cost = format_amount(Unit.USD, totals.cost_usd)
    unpriced = f"  ({totals.unpriced_calls} unpriced)" if totals.unpriced_calls else ""
    return (
        f"{key or '-':<24} {totals.tokens:>12,} {totals.prompt_tokens:>12,} "
        f"{totals.completion_tokens:>12,} {cost:>12} {totals.calls:>7,}{unpriced}"
    )


def print_usage(
    settings: Settings, tenant: str, first: date | None, last: date | None, group_by: str
) -> None:
    """Print a tenant's usage grouped by day, bot, user or model.

    Raises:
        typer.Exit: no such tenant or a bad grouping or range.
    """
    today = date.fromisoformat(window(Period.DAY, SYSTEM_CLOCK(), settings.timezone).label)
    last = last or today
    first = first or last.replace(day=1)
    with read_transaction(_factory(settings)) as db:
        _tenant_or_exit(db, tenant)
        try:
            rows = usage_report(db, tenant, first, last, group_by, settings.timezone)
        except InvalidInput as exc:
            raise _fail(str(exc)) from exc
    typer.echo(f"Usage of {tenant}, {first} to {last} ({settings.timezone}), by {group_by}:")
    header = ("", "tokens", "prompt", "completion", "cost", "calls")
    typer.echo(f"{header[0]:<24} " + " ".join(f"{h:>12}" for h in header[1:5]) + f" {header[5]:>7}")
    for key, totals in rows:
        typer.echo(_row(key, totals))
    typer.echo(_row("total", total_of(rows)))


GroupBy = Annotated[str, typer.Option(help=f"One of {', '.join(GROUPINGS)}.")]
