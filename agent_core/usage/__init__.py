"""Usage and budgets: the ledger of model calls, what they cost, and the limits on them."""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.usage.budgets import Budgets, BudgetSpec, BudgetStatus, Scope, Unit
from agent_core.usage.ledger import (
    CallKeys,
    Charge,
    PendingCall,
    Purpose,
    UsageLedger,
    UsageScope,
    compaction_keys,
    turn_keys,
)
from agent_core.usage.metering import LedgerModel
from agent_core.usage.periods import SYSTEM_CLOCK, Clock, Period


@dataclass(frozen=True, slots=True)
class UsageServices:
    """The ledger and the budgets of one process (same prices, same clock)."""

    ledger: UsageLedger
    budgets: Budgets


__all__ = (
    "SYSTEM_CLOCK",
    "BudgetSpec",
    "BudgetStatus",
    "Budgets",
    "CallKeys",
    "Charge",
    "Clock",
    "LedgerModel",
    "PendingCall",
    "Period",
    "Purpose",
    "Scope",
    "Unit",
    "UsageLedger",
    "UsageScope",
    "UsageServices",
    "compaction_keys",
    "turn_keys",
)
