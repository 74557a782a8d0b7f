"""Budgets: checked before a model call on its estimate, warned about at 80 % and 95 %.

A budget limits the tokens (prompt plus completion) or the US dollars a tenant spends per
day or month (in ``HUBBUB_TIMEZONE``): the tenant as a whole, each of its users, or each of
its chats. Usage is read from the ledger, so the summary model's calls count as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from agent_core.db.models import Budget
from agent_core.errors import InvalidInput
from agent_core.llm.costs import CostTable
from agent_core.usage.ledger import UsageScope
from agent_core.usage.periods import SYSTEM_CLOCK, Clock, Period, Window, window
from agent_core.usage.repository import Totals, UsageRepository

WARNING_LEVELS = (80, 95)
"""Per cent of a budget at which the chat is warned, once each per period."""


class Scope(StrEnum):
    """Whose usage a budget counts."""

    TENANT = "tenant"
    USER = "user"
    CHAT = "chat"


class Unit(StrEnum):
    """What a budget counts."""

    TOKENS = "tokens"
    USD = "usd"


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """A budget as set by an operator (validated)."""

    scope: Scope
    period: Period
    unit: Unit
    amount: float

    @classmethod
    def parse(cls, scope: str, period: str, unit: str, amount: float) -> BudgetSpec:
        """A validated budget.

        Raises:
            InvalidInput: an unknown scope, period or unit, or a negative amount.
        """
        for value, kind in ((scope, Scope), (period, Period), (unit, Unit)):
            if value not in {str(member) for member in kind}:
                allowed = ", ".join(str(member) for member in kind)
                raise InvalidInput(
                    f"{kind.__name__.lower()} must be one of {allowed}, not {value!r}"
                )
        if amount < 0:
            raise InvalidInput("a budget's amount must be 0 or more")
        if unit == Unit.TOKENS and amount != int(amount):
            raise InvalidInput("a token budget is a whole number of tokens")
        return cls(Scope(scope), Period(period), Unit(unit), float(amount))


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """One budget as it applies to one scope now: how much of it is used."""

    budget_id: int
    scope: Scope
    period: Period
    unit: Unit
    amount: float
    subject: str
    """The user id or chat key counted (empty for the tenant)."""
    window: Window
    used: float

    @property
    def share(self) -> float:
        """Used over the amount (1.0 is the whole budget)."""
        if self.amount <= 0:
            return 1.0 if self.used <= 0 else float("inf")
        return self.used / self.amount

    def exhausted_by(self, estimate: float) -> bool:
        """Whether the budget is used up, or a call of ``estimate`` would pass it."""
        return self.used >= self.amount or self.used + estimate > self.amount


def format_amount(unit: Unit, value: float) -> str:
    """``12,000 tokens`` or ``$0.0840``."""
    if unit is Unit.TOKENS:
        return f"{round(value):,} tokens"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _whose(scope: Scope) -> tuple[str, str]:
    """(subject with verb "has", possessive) for texts people read in the chat."""
    if scope is Scope.USER:
        return "You have", "Your"
    if scope is Scope.CHAT:
        return "This chat has", "This chat's"
    return "This bot's account has", "This bot's account's"


def _period_word(period: Period) -> str:
    return "daily" if period is Period.DAY else "monthly"


class Budgets:
    """Reads budgets against the ledger, for one deployment's time zone and clock.

    Args:
        costs: model prices (a USD estimate is the input price of the estimated prompt).
        timezone: the zone days and months are counted in.
        clock: the current time.
    """

    def __init__(
        self, costs: CostTable, *, timezone: str = "UTC", clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.costs = costs
        self.timezone = timezone
        self.clock = clock

    def statuses(self, db: Session, scope: UsageScope) -> list[BudgetStatus]:
        """Every budget that applies to ``scope`` with its use in the current period."""
        repo = UsageRepository.from_session(db)
        now = self.clock()
        cache: dict[tuple[str, str, datetime], Totals] = {}
        found = []
        for budget in repo.budgets(scope.tenant_id):
            subject = self._subject(budget, scope)
            if subject is None:
                continue
            current = window(Period(budget.period), now, self.timezone)
            cache_key = (budget.scope, subject, current.start)
            if cache_key not in cache:
                cache[cache_key] = repo.totals(
                    scope.tenant_id,
                    current.start,
                    user_id=subject if budget.scope == Scope.USER else None,
                    chat_key=subject if budget.scope == Scope.CHAT else None,
                )
            totals = cache[cache_key]
            used = float(totals.tokens) if budget.unit == Unit.TOKENS else totals.cost_usd
            found.append(
                BudgetStatus(
                    budget.id,
                    Scope(budget.scope),
                    Period(budget.period),
                    Unit(budget.unit),
                    budget.amount,
                    subject,
                    current,
                    used,
                )
            )
        return found

    @staticmethod
    def _subject(budget: Budget, scope: UsageScope) -> str | None:
        if budget.scope == Scope.USER:
            return scope.user_id
        if budget.scope == Scope.CHAT:
            return scope.chat_key
        return ""

    def check(
        self, db: Session, scope: UsageScope, *, model: str, estimate_tokens: int
    ) -> BudgetStatus | None:
        """The budget a call of ``estimate_tokens`` prompt tokens would break, if any."""
        price = self.costs.price(model)
        estimate_usd = estimate_tokens * price.input if price is not None else 0.0
        for status in self.statuses(db, scope):
            estimate = estimate_tokens if status.unit is Unit.TOKENS else estimate_usd
            if status.exhausted_by(estimate):
                return status
        return None

    def new_warnings(self, db: Session, scope: UsageScope) -> list[str]:
        """Warnings for levels crossed and not yet told this period (noted as told)."""
        repo = UsageRepository.from_session(db)
        texts = []
        for status in self.statuses(db, scope):
            crossed = [level for level in WARNING_LEVELS if status.share * 100 >= level]
            if not crossed:
                continue
            level = crossed[-1]
            # Both levels are noted, so a jump past 95 % does not warn about 80 % later.
            given = [
                repo.add_alert(status.budget_id, status.subject, status.window.label, lvl)
                for lvl in crossed
            ]
            if given[-1]:
                texts.append(self.warning(status, level))
        return texts

    def resets_at(self, status: BudgetStatus) -> str:
        """When the budget's period ends, in the deployment's zone."""
        end = status.window.end.astimezone(ZoneInfo(self.timezone))
        return f"{end:%Y-%m-%d %H:%M} {self.timezone}"

    def warning(self, status: BudgetStatus, level: int) -> str:
        """The notice shown with the reply that crossed ``level`` per cent."""
        has, _ = _whose(status.scope)
        return (
            f"⚠️ {has} used {status.share:.0%} of the {_period_word(status.period)} budget "
            f"({format_amount(status.unit, status.used)} of "
            f"{format_amount(status.unit, status.amount)}; warning at {level} %). "
            f"It resets at {self.resets_at(status)}."
        )

    def refusal(self, status: BudgetStatus) -> str:
        """The reply instead of a model call when a budget is used up."""
        _, whose = _whose(status.scope)
        state = "is used up" if status.used >= status.amount else "has too little left for this"
        return (
            f"{whose} {_period_word(status.period)} budget {state} "
            f"({format_amount(status.unit, status.used)} of "
            f"{format_amount(status.unit, status.amount)}), so I cannot answer until it "
            f"resets at {self.resets_at(status)}. Your message is kept."
        )
