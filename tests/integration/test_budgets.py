"""Budgets crossed in a chat: warnings at 80 % and 95 % with the replies, a refusal that
costs no model call, and the next day's reset, on a clock the test moves."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Message, OutboxEntry
from agent_core.usage.repository import UsageRepository
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

OUTPUT_PRICE = 0.001
"""USD per completion token; prompts are free, so a reply's cost is its length."""


class MovableClock:
    """The time the gateway reads; the test moves it (never sleeps)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _words(n: int) -> str:
    return " ".join(["word"] * n)  # one cl100k token per word


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(datetime(2026, 3, 10, 15, 0, tzinfo=UTC))


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    clock: MovableClock,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    costs = tmp_path / "costs.yaml"
    costs.write_text(json.dumps({"openai/fake-model": {"input": 0, "output": OUTPUT_PRICE}}))
    env = hubbub_env(
        db_url=db_url, home=tmp_path, fake=fake_llm, model_costs=costs, timezone="Europe/Paris"
    )
    return gateway_factory(settings_from_env(env), clock=clock)


def _set_budget(gateway: GatewayServer, scope: str, period: str, unit: str, amount: float) -> None:
    with transaction(gateway.runtime.factory) as db:
        UsageRepository.from_session(db).set_budget(DEFAULT_TENANT_ID, scope, period, unit, amount)


def _delivered(gateway: GatewayServer, text: str) -> str:
    """What the platform was sent for the message ``text``: notices, then the reply."""
    with transaction(gateway.runtime.factory) as db:
        message = db.scalars(select(Message).where(Message.content == text)).one()
        entry = db.scalars(
            select(OutboxEntry).where(OutboxEntry.trigger_message_id == message.id)
        ).one()
        return entry.text


def test_a_chat_budget_warns_at_80_and_95_refuses_past_100_and_resets_next_day(
    gateway: GatewayServer, fake_llm: FakeLLM, clock: MovableClock
) -> None:
    _set_budget(gateway, "chat", "day", "usd", 0.1)
    refusals_before = REGISTRY.get_sample_value(
        "hubbub_tenant_budget_refusals_total", {"tenant": DEFAULT_TENANT_ID}
    )
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        fake_llm.queue_replies(
            ScriptedReply(_words(85)), ScriptedReply(_words(11)), ScriptedReply(_words(10))
        )
        post_accepted(client, "spend", "first", user="ann")
        wait_replies(client, "spend", 1)
        first = _delivered(gateway, "first")
        assert first.startswith("⚠️ This chat has used 85% of the daily budget ($0.0850 of $0.1000")
        assert "warning at 80 %" in first
        assert "resets at 2026-03-11 00:00 Europe/Paris" in first
        assert first.endswith(_words(85))

        post_accepted(client, "spend", "second", user="ann")
        wait_replies(client, "spend", 2)
        second = _delivered(gateway, "second")
        assert "used 96% of the daily budget" in second
        assert "warning at 95 %" in second

        # Under the budget before the call, past it after: answered, and no third warning.
        post_accepted(client, "spend", "third", user="ann")
        wait_replies(client, "spend", 3)
        assert _delivered(gateway, "third") == _words(10)

        asked = len(fake_llm.chat_requests())
        post_accepted(client, "spend", "fourth", user="ann")
        refusal = wait_replies(client, "spend", 4)[-1]
        assert refusal["kind"] == "notice"
        assert refusal["text"] == (
            "This chat's daily budget is used up ($0.1060 of $0.1000), so I cannot answer "
            "until it resets at 2026-03-11 00:00 Europe/Paris. Your message is kept."
        )
        assert len(fake_llm.chat_requests()) == asked, "a refusal costs no model call"
        assert (
            REGISTRY.get_sample_value(
                "hubbub_tenant_budget_refusals_total", {"tenant": DEFAULT_TENANT_ID}
            )
            == (refusals_before or 0) + 1
        )

        # 23:30 in Paris is still the same day; 00:00 is the next one.
        clock.now = datetime(2026, 3, 10, 22, 30, tzinfo=UTC)
        post_accepted(client, "spend", "still today", user="ann")
        assert wait_replies(client, "spend", 5)[-1]["kind"] == "notice"
        clock.now = datetime(2026, 3, 10, 23, 0, tzinfo=UTC) + timedelta(seconds=1)
        fake_llm.queue_replies(ScriptedReply(_words(10)))
        post_accepted(client, "spend", "next day", user="ann")
        assert wait_replies(client, "spend", 6)[-1]["text"] == _words(10)
        assert _delivered(gateway, "next day") == _words(10), "no warning at 10 %"

        post_accepted(client, "spend", "/usage", user="ann")
        usage = wait_replies(client, "spend", 7)[-1]["text"]
        assert "Spent today (2026-03-11) and this month (2026-03):" in usage
        assert "- this chat: " in usage
        assert "each chat, daily: $0.0100 of $0.1000 (10%)" in usage
    with transaction(gateway.runtime.factory) as db:
        stored = db.scalars(select(Message.content).where(Message.role == "user")).all()
    assert {"fourth", "still today"} <= set(stored), "refused messages are kept"


def test_a_user_token_budget_refuses_on_the_estimate_before_any_call(
    gateway: GatewayServer, fake_llm: FakeLLM
) -> None:
    # Any prompt (the system prompt alone) is over 50 tokens: refused before the call.
    _set_budget(gateway, "user", "month", "tokens", 50)
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        post_accepted(client, "tiny", "hello", user="cy")
        refusal = wait_replies(client, "tiny", 1)[-1]
    assert refusal["text"].startswith(
        "Your monthly budget has too little left for this (0 tokens of 50 tokens)"
    )
    assert fake_llm.chat_requests() == []
