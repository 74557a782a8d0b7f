"""Budgets are checked and reserved atomically: concurrent turns near a limit cannot
together overspend it, a failed call releases its estimate, a dead worker's expires."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.models import DEFAULT_TENANT_ID, BudgetReservation, UsageRecord
from agent_core.llm.costs import CostTable
from agent_core.usage import Budgets, UsageScope
from agent_core.usage.repository import UsageRepository
from tests.fixtures.llm_server import Failure, FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration

TURNS = 5
"""Concurrent turns near the limit: room for one of them."""
TEXT = "please summarise the quarterly numbers for the team"


class MovableClock:
    """The time the gateway reads; the test moves it (never sleeps)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _set_budget(gateway: GatewayServer, amount: float) -> None:
    with transaction(gateway.runtime.factory) as db:
        UsageRepository.from_session(db).set_budget(
            DEFAULT_TENANT_ID, "tenant", "day", "tokens", amount
        )


def _reservations(gateway: GatewayServer) -> list[BudgetReservation]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(BudgetReservation)))


def _charged(gateway: GatewayServer) -> list[UsageRecord]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(UsageRecord).order_by(UsageRecord.id)))


def _held_estimate(gateway: GatewayServer, fake_llm: FakeLLM) -> int:
    """The tokens reserved by the one call the fake provider is holding."""
    wait_until(lambda: fake_llm.held == 1, what="the call held by the provider")
    (held,) = _reservations(gateway)
    return held.tokens


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(datetime(2026, 3, 10, 9, 0, tzinfo=UTC))


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    clock: MovableClock,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm, worker_concurrency=TURNS)
    return gateway_factory(settings_from_env(env), clock=clock)


def test_concurrent_turns_near_the_limit_make_one_call_and_overspend_by_its_overshoot_only(
    gateway: GatewayServer, fake_llm: FakeLLM
) -> None:
    _set_budget(gateway, 10**9)
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        # A first turn shows what a turn's call reserves while it is in flight.
        fake_llm.hold_next()
        post_accepted(client, "warm", TEXT, user="ann")
        estimate = _held_estimate(gateway, fake_llm)
        fake_llm.release()
        wait_replies(client, "warm", 1)
        assert _reservations(gateway) == [], "settled when the call was charged"
        used = sum(r.prompt_tokens + r.completion_tokens for r in _charged(gateway))

        # Room for one more call's estimate and a half: every turn alone would pass.
        limit = used + estimate + estimate // 2
        _set_budget(gateway, limit)
        asked = len(fake_llm.chat_requests())
        fake_llm.hold_next(TURNS)
        chats = [f"rush-{i}" for i in range(TURNS)]
        for chat in chats:
            post_accepted(client, chat, TEXT, user="ann")

        def refused() -> list[str]:
            return [c for c in chats if [r for r in replies(client, c) if r["kind"] == "notice"]]

        # Each turn either holds a call in the provider or was refused before calling.
        wait_until(
            lambda: fake_llm.held + len(refused()) == TURNS, what="every turn called or refused"
        )
        assert fake_llm.held == 1
        (reservation,) = _reservations(gateway)
        fake_llm.release(TURNS)
        (answered,) = set(chats) - set(refused())
        wait_replies(client, answered, 1)

    assert len(fake_llm.chat_requests()) == asked + 1, "refusals cost no model call"
    rows = _charged(gateway)
    (last,) = rows[len(rows) - 1 :]
    overshoot = last.prompt_tokens + last.completion_tokens - reservation.tokens
    total = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    assert total <= limit + max(overshoot, 0)
    assert _reservations(gateway) == []


def test_a_failed_call_releases_its_estimate(gateway: GatewayServer, fake_llm: FakeLLM) -> None:
    _set_budget(gateway, 10**9)
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        fake_llm.fail_next(Failure.unauthorized())
        post_accepted(client, "fails", TEXT, user="ann")
        assert wait_replies(client, "fails", 1)[-1]["kind"] == "notice"
    assert _charged(gateway) == []
    assert _reservations(gateway) == [], "released without a charge"


def test_a_dead_workers_reservation_stops_counting_when_it_expires(
    gateway: GatewayServer, fake_llm: FakeLLM, clock: MovableClock
) -> None:
    _set_budget(gateway, 1_000)
    runtime = gateway.runtime
    # A worker reserved nearly the whole budget, then died before its call returned.
    dead = UsageScope(DEFAULT_TENANT_ID, chat_key="elsewhere", user_id="zed")
    with transaction(runtime.factory) as db:
        assert (
            runtime.usage.budgets.reserve(
                db, dead, "turn:dead", model="openai/fake-model", estimate_tokens=950
            )
            is None
        )
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        post_accepted(client, "after", TEXT, user="ann")
        refusal = wait_replies(client, "after", 1)[-1]
        assert refusal["kind"] == "notice"
        assert "has too little left for this (0 tokens of 1,000 tokens)" in refusal["text"]
        assert fake_llm.chat_requests() == []

        clock.now += timedelta(seconds=runtime.settings.budget_reservation_seconds)
        post_accepted(client, "after", "and now?", user="ann")
        assert wait_replies(client, "after", 2)[-1]["kind"] != "notice"
    assert len(fake_llm.chat_requests()) == 1
    assert [r.holder for r in _reservations(gateway)] == [], "the expired one was dropped"


def test_concurrent_reservations_for_one_tenant_never_pass_its_budget(db_url: str) -> None:
    engine = create_db_engine(db_url)
    factory = make_session_factory(engine)
    try:
        with transaction(factory) as db:
            UsageRepository.from_session(db).set_budget(
                DEFAULT_TENANT_ID, "user", "month", "tokens", 1_000
            )
        budgets = Budgets(CostTable({}))
        start = threading.Barrier(8)
        held: list[str] = []
        lock = threading.Lock()

        def reserve(i: int) -> None:
            scope = UsageScope(DEFAULT_TENANT_ID, chat_key=f"chat-{i}", user_id="ann")
            start.wait(timeout=120)
            with transaction(factory) as db:
                broken = budgets.reserve(
                    db, scope, f"turn:{i}", model="openai/fake-model", estimate_tokens=300
                )
            if broken is None:
                with lock:
                    held.append(f"turn:{i}")

        threads = [threading.Thread(target=reserve, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(held) == 3, "three estimates of 300 fit in 1,000, a fourth does not"
        with transaction(factory) as db:
            stored = sorted(db.scalars(select(BudgetReservation.holder)))
            (status,) = budgets.statuses(db, UsageScope(DEFAULT_TENANT_ID, "any", user_id="ann"))
        assert stored == sorted(held)
        assert (status.used, status.reserved) == (0, 900)
    finally:
        engine.dispose()
