"""Compactions count against budgets like turns: checked before their summary calls,
charged after, skipped past the budget (between turns) or refused (``/compress``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from adapters.messages import InboundMessage
from agent_core.compaction.triggers import RING_EVERY_MESSAGES
from agent_core.db.engine import transaction
from agent_core.db.models import (
    DEFAULT_TENANT_ID,
    BudgetReservation,
    Compaction,
    UsageRecord,
)
from agent_core.usage.repository import UsageRepository
from tests.fixtures.llm_server import FakeLLM, is_summary_request
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration

SENTENCE = "The deploy of build {i} to staging finished; Alice checked /var/log/app{i}.log. "
SKIPPED = "hubbub_tenant_compactions_over_budget_total"


def chatter(i: int) -> str:
    return (SENTENCE.format(i=i) * 6).strip()


def _skipped() -> float:
    return REGISTRY.get_sample_value(SKIPPED, {"tenant": DEFAULT_TENANT_ID}) or 0.0


def _summary_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake.chat_requests() if is_summary_request(r)]


def _set_budget(gateway: GatewayServer, scope: str, amount: float) -> None:
    with transaction(gateway.runtime.factory) as db:
        UsageRepository.from_session(db).set_budget(
            DEFAULT_TENANT_ID, scope, "day", "tokens", amount
        )


def _compactions(gateway: GatewayServer) -> list[Compaction]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(Compaction)))


def _rows(gateway: GatewayServer) -> list[UsageRecord]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(UsageRecord)))


def _reservations(gateway: GatewayServer) -> list[BudgetReservation]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(BudgetReservation)))


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(
        db_url=db_url, home=tmp_path, fake=fake_llm, context_length=8192, max_output_tokens=1024
    )
    return gateway_factory(settings_from_env(env))


def test_compress_past_the_budget_answers_the_refusal_and_calls_no_model(
    gateway: GatewayServer, fake_llm: FakeLLM
) -> None:
    _set_budget(gateway, "chat", 10**9)
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        for i in range(8):
            post_accepted(client, "full", chatter(i), user="ann")
            wait_replies(client, "full", i + 1)
        used = sum(r.prompt_tokens + r.completion_tokens for r in _rows(gateway))
        _set_budget(gateway, "chat", used)
        asked, skipped = len(fake_llm.chat_requests()), _skipped()

        post_accepted(client, "full", "/compress", user="ann")
        answer = wait_replies(client, "full", 9)[-1]["text"]

    assert answer.startswith(
        f"This chat's daily budget is used up ({used:,} tokens of {used:,} tokens)"
    )
    assert len(fake_llm.chat_requests()) == asked, "no summary call"
    assert _compactions(gateway) == []
    assert _skipped() == skipped + 1
    assert _reservations(gateway) == []


def test_between_turns_a_compaction_past_the_budget_is_skipped_and_one_within_is_charged(
    gateway: GatewayServer, fake_llm: FakeLLM
) -> None:
    def chatter_in_group(i: int) -> None:
        gateway.runtime.intake.accept(
            InboundMessage(
                platform="webchat",
                chat_id="g1",
                chat_type="group",
                message_id=f"g1-{i}",
                sender_id=f"u{i % 3}",
                sender_name=["Alice", "Bob", "Chen"][i % 3],
                text=chatter(i),
                addressed=False,
            )
        )

    _set_budget(gateway, "tenant", 0)
    skipped = _skipped()
    for i in range(60):
        chatter_in_group(i)
    # Nobody asked: every attempt over the line is a background compaction, refused.
    wait_until(lambda: _skipped() > skipped, what="a compaction skipped over budget")
    assert _summary_requests(fake_llm) == []
    assert _compactions(gateway) == []
    assert _rows(gateway) == []

    _set_budget(gateway, "tenant", 10**9)
    for i in range(60, 60 + RING_EVERY_MESSAGES):  # over the line, it rings this often
        chatter_in_group(i)
    wait_until(lambda: _compactions(gateway), what="a background compaction within budget")
    summary_rows = [r for r in _rows(gateway) if r.purpose == "summary"]
    assert len(summary_rows) == len(_summary_requests(fake_llm)) >= 1
    assert all(r.user_id is None for r in summary_rows), "charged to the tenant and chat"
    wait_until(lambda: _reservations(gateway) == [], what="the reservation released")
