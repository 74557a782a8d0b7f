"""What ``/usage`` says about spending: today and this month, and each budget's share used."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from agent_core.errors import InvalidInput
from agent_core.usage.budgets import Budgets, BudgetStatus, Scope, Unit, format_amount
from agent_core.usage.ledger import UsageScope
from agent_core.usage.periods import Period, window
from agent_core.usage.repository import Totals, UsageRepository

_SCOPE_NAMES = {Scope.CHAT: "each chat", Scope.USER: "each person", Scope.TENANT: "the account"}


def _spent(totals: Totals) -> str:
    text = f"{totals.tokens:,} tokens, {format_amount(Unit.USD, totals.cost_usd)}"
    if totals.unpriced_calls:
        text += f" ({totals.unpriced_calls} calls of unpriced models counted at $0)"
    return text


def _budget_line(budgets: Budgets, status: BudgetStatus) -> str:
    period = "daily" if status.period is Period.DAY else "monthly"
    return (
        f"- {_SCOPE_NAMES[status.scope]}, {period}: {format_amount(status.unit, status.used)} "
        f"of {format_amount(status.unit, status.amount)} ({status.share:.0%}), resets "
        f"{budgets.resets_at(status)}"
    )


def usage_lines(db: Session, budgets: Budgets, scope: UsageScope) -> list[str]:
    """Lines for ``/usage``: what this chat, this person and the tenant used, and budgets."""
    repo = UsageRepository.from_session(db)
    now = budgets.clock()
    day = window(Period.DAY, now, budgets.timezone)
    month = window(Period.MONTH, now, budgets.timezone)
    subjects: list[tuple[str, str | None, str | None]] = [("this chat", None, scope.chat_key)]
    if scope.user_id is not None:
        subjects.append(("you", scope.user_id, None))
    subjects.append(("the whole account", None, None))
    lines = [f"Spent today ({day.label}) and this month ({month.label}):"]
    for name, user_id, chat_key in subjects:
        today = repo.totals(scope.tenant_id, day.start, user_id=user_id, chat_key=chat_key)
        this_month = repo.totals(scope.tenant_id, month.start, user_id=user_id, chat_key=chat_key)
        lines.append(f"- {name}: {_spent(today)} today; {_spent(this_month)} this month")
    statuses = budgets.statuses(db, scope)
    if statuses:
        lines.append("Budgets:")
        lines += [_budget_line(budgets, status) for status in statuses]
    else:
        lines.append("No budgets are set.")
    return lines


GROUPINGS = ("day", "bot", "user", "model")
"""How a usage report may be grouped."""
_COLUMNS = {"bot": "bot_id", "user": "user_id", "model": "model"}


def _add(a: Totals, b: Totals) -> Totals:
    return Totals(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.cost_usd + b.cost_usd,
        a.calls + b.calls,
        a.unpriced_calls + b.unpriced_calls,
    )


def usage_report(
    db: Session,
    tenant_id: str,
    first_day: date,
    last_day: date,
    group_by: str,
    timezone: str,
) -> list[tuple[str, Totals]]:
    """A tenant's usage from ``first_day`` to ``last_day`` (days in ``timezone``), grouped.

    Rows are keyed by the day (``2026-12-02``), the bot id, the user id or the model;
    calls without a user (compactions between turns) are keyed ``""``.

    Raises:
        InvalidInput: an unknown grouping, or the last day before the first.
    """
    if group_by not in GROUPINGS:
        raise InvalidInput(f"group_by must be one of {', '.join(GROUPINGS)}, not {group_by!r}")
    if last_day < first_day:
        raise InvalidInput("'to' is before 'from'")
    zone = ZoneInfo(timezone)
    since = datetime.combine(first_day, time(), zone).astimezone(UTC)
    until = datetime.combine(last_day + timedelta(days=1), time(), zone).astimezone(UTC)
    repo = UsageRepository.from_session(db)
    if group_by != "day":
        rows = repo.grouped(tenant_id, since, until, _COLUMNS[group_by])
        return [("" if key is None else str(key), totals) for key, totals in rows]
    days: dict[str, Totals] = {}
    for at, prompt, completion, cost, priced in repo.calls_between(tenant_id, since, until):
        label = at.astimezone(zone).strftime("%Y-%m-%d")
        one = Totals(prompt, completion, cost, 1, 0 if priced else 1)
        days[label] = _add(days.get(label, Totals()), one)
    return sorted(days.items())


def total_of(rows: list[tuple[str, Totals]]) -> Totals:
    """All rows of a report together."""
    total = Totals()
    for _, totals in rows:
        total = _add(total, totals)
    return total
