"""Budgets: checked before a model call on its estimate, warned about at 80 % and 95 %.

A budget limits the tokens (prompt plus completion) or the US dollars a tenant spends per
day or month (in ``HUBBUB_TIMEZONE``): the tenant as a whole, each of its users, or each of
its chats. Usage is read from the ledger, so the summary model's calls count as well.

The check before a call and the reservation of its estimate are one step under the
tenant's budget lock (:meth:`Budgets.reserve`): concurrent turns each see the estimates of
the calls still in flight, so together they cannot pass a budget that each alone would
not. A reservation is settled in the transaction that charges the call's real usage,
released when the call fails, and stops counting when it expires (its worker died).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from agent_core.config import DEFAULT_BUDGET_RESERVATION_SECONDS
from agent_core.db.models import Budget
from agent_core.errors import InvalidInput
from agent_core.llm.costs import CostTable
from agent_core.usage.ledger import UsageScope
from agent_core.usage.periods import SYSTEM_CLOCK, Clock, Period, Window, window
from agent_core.usage.repository import Reserved, Totals, UsageRepository

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
    """Charged in the ledger this period."""
    reserved: float = 0.0
    """Held by calls in flight (other turns' estimates)."""

    @property
    def share(self) -> float:
        """Used over the amount (1.0 is the whole budget)."""
        if self.amount <= 0:
            return 1.0 if self.used <= 0 else float("inf")
        return self.used / self.amount

    def exhausted_by(self, estimate: float) -> bool:
        """Whether the budget is used up, or a call of ``estimate`` would pass it."""
        committed = self.used + self.reserved
        return committed >= self.amount or committed + estimate > self.amount


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
        reservation_seconds: how long an unsettled reservation counts.
    """

    def __init__(
        self,
        costs: CostTable,
        *,
        timezone: str = "UTC",
        clock: Clock = SYSTEM_CLOCK,
        reservation_seconds: float = DEFAULT_BUDGET_RESERVATION_SECONDS,
    ) -> None:
        self.costs = costs
        self.timezone = timezone
        self.clock = clock
        self.reservation_seconds = reservation_seconds

    def statuses(self, db: Session, scope: UsageScope) -> list[BudgetStatus]:
        """Every budget that applies to ``scope`` with its use in the current period."""
        repo = UsageRepository.from_session(db)
        now = self.clock()
        cache: dict[tuple[str, str, datetime], Totals] = {}
        holding: dict[tuple[str, str], Reserved] = {}
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
            if (budget.scope, subject) not in holding:
                holding[budget.scope, subject] = repo.reserved(
                    scope.tenant_id,
                    now,
                    user_id=subject if budget.scope == Scope.USER else None,
                    chat_key=subject if budget.scope == Scope.CHAT else None,
                )
            totals, held = cache[cache_key], holding[budget.scope, subject]
            tokens = budget.unit == Unit.TOKENS
            used = float(totals.tokens) if tokens else totals.cost_usd
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
                    float(held.tokens) if tokens else held.cost_usd,
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
        estimate_usd = self._estimate_usd(model, estimate_tokens)
        for status in self.statuses(db, scope):
            estimate = estimate_tokens if status.unit is Unit.TOKENS else estimate_usd
            if status.exhausted_by(estimate):
                return status
        return None

    def _estimate_usd(self, model: str, estimate_tokens: int) -> float:
        price = self.costs.price(model)
        return estimate_tokens * price.input if price is not None else 0.0

    @staticmethod
    def apply_to(db: Session, scope: UsageScope) -> bool:
        """Whether the tenant has budgets (a read: without them nothing is reserved)."""
        return bool(UsageRepository.from_session(db).budgets(scope.tenant_id))

    def reserve(
        self, db: Session, scope: UsageScope, holder: str, *, model: str, estimate_tokens: int
    ) -> BudgetStatus | None:
        """Check a call's estimate and hold it for ``holder``; the budget broken, if any.

        Run in a write unit of work: the tenant's lock is held until it commits, so the
        check and the reservation are one step for every concurrent caller. A tenant
        without budgets reserves nothing (and takes no lock). On a refusal nothing is held,
        and the holder's previous reservation is dropped.
        """
        repo = UsageRepository.from_session(db)
        if not repo.budgets(scope.tenant_id):
            return None
        now = self.clock()
        repo.lock_tenant(scope.tenant_id, now)
        repo.remove_expired_reservations(scope.tenant_id, now)
        repo.remove_reservation(holder)
        broken = self.check(db, scope, model=model, estimate_tokens=estimate_tokens)
        if broken is not None:
            return broken
        repo.replace_reservation(
            {
                "holder": holder,
                "tenant_id": scope.tenant_id,
                "chat_key": scope.chat_key,
                "user_id": scope.user_id,
                "tokens": estimate_tokens,
                "cost_usd": self._estimate_usd(model, estimate_tokens),
                "expires_at": now + timedelta(seconds=self.reservation_seconds),
            }
        )
        return None

    @staticmethod
    def settle(db: Session, holder: str) -> None:
        """Drop the holder's reservation (where its call is charged, or alone: released)."""
        UsageRepository.from_session(db).remove_reservation(holder)

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
