"""The usage ledger: one row per model call, charged once.

A turn's rows commit in the transaction that stores what the call produced (its tool round
or the reply), so ledger and transcript agree after a crash; a compaction's rows are written
as each summary call returns.

Every call is named by a key (``turn:<message id>:main:<n>``,
``compaction:<session>:<summary version>:<n>``). A turn that runs again after a crash
numbers its calls from the tool rounds it finds stored, so a call whose effect was kept is
never charged twice; a compaction that runs again produces the same summary version.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession
from agent_core.llm.costs import CostTable
from agent_core.llm.model import Usage
from agent_core.memory.service import chat_scope_key
from agent_core.usage.periods import SYSTEM_CLOCK, Clock
from agent_core.usage.repository import UsageRepository

log = logging.getLogger(__name__)


class Purpose(StrEnum):
    """Why a model was called."""

    MAIN = "main"
    SUMMARY = "summary"


@dataclass(frozen=True, slots=True)
class UsageScope:
    """Whom a call is charged to: the tenant, its chat and bot, the session, the person."""

    tenant_id: str
    chat_key: str
    bot_id: int | None = None
    session_id: str | None = None
    user_id: str | None = None
    """The person being answered; ``None`` for work no one asked for (quiet compactions)."""

    @classmethod
    def of(cls, chat_session: ChatSession, user_id: str | None = None) -> UsageScope:
        """The scope of a session's calls, for ``user_id`` when a person is being answered."""
        return cls(
            tenant_id=chat_session.tenant_id,
            chat_key=chat_scope_key(
                chat_session.tenant_id,
                chat_session.bot_id,
                chat_session.platform,
                chat_session.chat_id,
            ),
            bot_id=chat_session.bot_id,
            session_id=chat_session.id,
            user_id=user_id,
        )


@dataclass(frozen=True, slots=True)
class Charge:
    """One row written to the ledger (handed to metrics)."""

    tenant_id: str
    model: str
    purpose: Purpose
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cost_known: bool


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call answered but not yet charged: a turn's rows commit with what the call produced."""

    scope: UsageScope
    call_key: str
    purpose: Purpose
    model: str
    usage: Usage | None
    at: datetime | None = None
    """When the call returned (``None``: when it is written)."""


class CallKeys:
    """Keys for the successive calls of one turn or compaction (thread-safe)."""

    def __init__(self, prefix: str, start: int = 0) -> None:
        self._prefix = prefix
        self._numbers = itertools.count(start)
        self._lock = threading.Lock()

    def next(self) -> str:
        """The next call's key."""
        with self._lock:
            return f"{self._prefix}:{next(self._numbers)}"


def turn_keys(message_id: int, stored_rounds: int) -> CallKeys:
    """Keys of a turn's main calls, counting on from the tool rounds already stored."""
    return CallKeys(f"turn:{message_id}:{Purpose.MAIN}", stored_rounds)


def compaction_keys(session_id: str, summary_version: int) -> CallKeys:
    """Keys of the summary calls of the compaction that starts from ``summary_version``."""
    return CallKeys(f"compaction:{session_id}:{summary_version}:{Purpose.SUMMARY}")


class UsageLedger:
    """Writes usage rows with their cost, each in its own short transaction.

    Args:
        factory: opens units of work.
        costs: model prices.
        clock: the time rows are stamped with (and budget periods read).
        on_charge: called for each row written (not for a key already charged).
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        costs: CostTable,
        *,
        clock: Clock = SYSTEM_CLOCK,
        on_charge: Callable[[Charge], None] | None = None,
    ) -> None:
        self.costs = costs
        self.clock = clock
        self._factory = factory
        self._on_charge = on_charge

    def record(
        self, scope: UsageScope, call_key: str, purpose: Purpose, model: str, usage: Usage | None
    ) -> Charge | None:
        """Charge one call in its own transaction; ``None`` when already charged or failed.

        A failed write is logged and swallowed: the model has answered, and the person
        must still get the answer.
        """
        call = PendingCall(scope, call_key, purpose, model, usage)
        try:
            # Not waited to disk: the turn's own durable commit that follows flushes it.
            with transaction(self._factory, durable=False) as db:
                written = self.write(db, [call])
        except SQLAlchemyError:
            log.warning(
                "usage row not written", extra={"call_key": call_key, "tenant": scope.tenant_id}
            )
            return None
        return written[0] if written else None

    def write(self, db: Session, calls: Sequence[PendingCall]) -> list[Charge]:
        """Charge calls in the caller's unit of work (a turn's own transaction).

        Returns the rows written; a key already charged is skipped.
        """
        repo = UsageRepository.from_session(db)
        written = []
        for call in calls:
            values, charge = self._row(call)
            if repo.add_record(values):
                written.append(charge)
                if self._on_charge is not None:
                    self._on_charge(charge)
        return written

    def _row(self, call: PendingCall) -> tuple[dict[str, Any], Charge]:
        scope, call_key, purpose, model = call.scope, call.call_key, call.purpose, call.model
        usage = call.usage or Usage(prompt_tokens=0)
        cost = self.costs.cost(model, usage)
        charge = Charge(
            scope.tenant_id,
            model,
            purpose,
            usage.prompt_tokens,
            usage.completion_tokens,
            cost.usd,
            cost.known,
        )
        values = {
            "call_key": call_key,
            "tenant_id": scope.tenant_id,
            "bot_id": scope.bot_id,
            "session_id": scope.session_id,
            "chat_key": scope.chat_key,
            "user_id": scope.user_id,
            "model": model,
            "purpose": str(purpose),
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "cost_usd": cost.usd,
            "cost_known": cost.known,
            "at": call.at or self.clock(),
        }
        return values, charge
