"""The usage ledger in the real pipeline: one exact row per model call, main and summary,
priced from ``HUBBUB_MODEL_COSTS``, and a turn run again charges no call twice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from agent_core.agent import Agent, TurnRequest
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, UsageRecord
from agent_core.memory.service import chat_scope_key
from agent_core.usage import UsageScope
from agent_core.usage.repository import UsageRepository
from tests.fixtures.llm_server import FakeLLM, ScriptedReply, is_summary_request, tool_call
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

INPUT_PRICE = 0.000001
OUTPUT_PRICE = 0.000002
CHATTER = "The deploy of build {i} to staging finished; Alice checked /var/log/app{i}.log. " * 6


def _costs_file(tmp_path: Path) -> Path:
    path = tmp_path / "costs.json"
    path.write_text(
        json.dumps({"openai/fake-model": {"input": INPUT_PRICE, "output": OUTPUT_PRICE}})
    )
    return path


def _rows(gateway: GatewayServer) -> list[UsageRecord]:
    with transaction(gateway.runtime.factory) as db:
        return list(db.scalars(select(UsageRecord).order_by(UsageRecord.id)))


def _message(gateway: GatewayServer, text: str) -> Message:
    with transaction(gateway.runtime.factory) as db:
        return db.scalars(select(Message).where(Message.content == text)).one()


def _session(gateway: GatewayServer, session_id: str) -> ChatSession:
    with transaction(gateway.runtime.factory) as db:
        found = db.get(ChatSession, session_id)
        assert found is not None
        return found


def _sample(name: str, tenant: str) -> float:
    return REGISTRY.get_sample_value(name, {"tenant": tenant}) or 0.0


def test_every_main_and_summary_call_writes_its_exact_row(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        model_costs=_costs_file(tmp_path),
        context_length=8192,
        max_output_tokens=1024,
    )
    gateway = gateway_factory(settings_from_env(env))
    prompt_before = _sample("hubbub_tenant_prompt_tokens_total", "default")
    cost_before = _sample("hubbub_tenant_cost_usd_total", "default")
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        for i in range(8):
            post_accepted(client, "ledger", CHATTER.format(i=i), user="ann")
            wait_replies(client, "ledger", i + 1)
        # A turn of two main calls: a tool round, then the answer.
        fake_llm.queue_replies(
            ScriptedReply(tool_calls=[tool_call("current_time", {})]), ScriptedReply("it is late")
        )
        post_accepted(client, "ledger", "what time is it?", user="ann")
        wait_replies(client, "ledger", 10)  # the tool round's assistant line, then the answer
        # /compress: summary calls, charged to the same person and chat.
        post_accepted(client, "ledger", "/compress", user="ann")
        assert wait_replies(client, "ledger", 11)[-1]["text"].startswith("Compressed ")

    trigger = _message(gateway, "what time is it?")
    chat = _session(gateway, trigger.session_id)
    rows = _rows(gateway)
    bodies, usages = fake_llm.chat_requests(), fake_llm.usages
    assert len(rows) == len(bodies) == len(usages) >= 11
    summaries = [u for b, u in zip(bodies, usages, strict=True) if is_summary_request(b)]
    chats = [u for b, u in zip(bodies, usages, strict=True) if not is_summary_request(b)]
    assert summaries, "the /compress made a summary call"

    main = [r for r in rows if r.purpose == "main"]
    assert [(r.prompt_tokens, r.completion_tokens) for r in main] == [
        (u["prompt_tokens"], u["completion_tokens"]) for u in chats
    ]
    assert [r.call_key for r in main[-2:]] == [
        f"turn:{trigger.id}:main:0",
        f"turn:{trigger.id}:main:1",
    ]
    summary = [r for r in rows if r.purpose == "summary"]
    assert sorted((r.prompt_tokens, r.completion_tokens) for r in summary) == sorted(
        (u["prompt_tokens"], u["completion_tokens"]) for u in summaries
    )
    assert all(r.call_key.startswith(f"compaction:{chat.id}:0:summary:") for r in summary)
    for row in rows:
        assert row.tenant_id == "default"
        assert row.bot_id == chat.bot_id
        assert row.session_id == chat.id
        assert row.chat_key == chat_scope_key("default", chat.bot_id, chat.platform, chat.chat_id)
        assert row.user_id == trigger.speaker_id == "ann"
        assert row.model == "openai/fake-model"
        assert row.cached_tokens == 0
        assert row.cost_known is True
        assert row.cost_usd == pytest.approx(
            row.prompt_tokens * INPUT_PRICE + row.completion_tokens * OUTPUT_PRICE
        )
    # Budgets read the ledger: the summary model's tokens count against them too.
    with transaction(gateway.runtime.factory) as db:
        UsageRepository.from_session(db).set_budget("default", "chat", "day", "tokens", 10**9)
    with transaction(gateway.runtime.factory) as db:
        scope = UsageScope.of(chat, "ann")
        (status,) = gateway.runtime.usage.budgets.statuses(db, scope)
    assert status.used == sum(r.prompt_tokens + r.completion_tokens for r in rows)
    assert _sample("hubbub_tenant_prompt_tokens_total", "default") - prompt_before == sum(
        r.prompt_tokens for r in rows
    )
    assert _sample("hubbub_tenant_cost_usd_total", "default") - cost_before == pytest.approx(
        sum(r.cost_usd for r in rows)
    )


def test_a_turn_run_again_charges_no_call_twice_and_an_unpriced_model_costs_nothing(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = gateway_factory(
        settings_from_env(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    )
    unpriced_before = _sample("hubbub_tenant_unpriced_calls_total", "default")
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        fake_llm.queue_replies(
            ScriptedReply(tool_calls=[tool_call("current_time", {})]), ScriptedReply("noon")
        )
        post_accepted(client, "again", "time please", user="bo")
        assert wait_replies(client, "again", 2)[-1]["text"] == "noon"  # tool round, answer
    assert len(_rows(gateway)) == 2
    assert [r.cost_known for r in _rows(gateway)] == [False, False]
    assert all(r.cost_usd == 0 for r in _rows(gateway))
    assert _sample("hubbub_tenant_unpriced_calls_total", "default") - unpriced_before == 2

    # As after a crash between the model's answer and the reply's commit: the turn runs
    # again from its stored tool round. The provider is asked again; the ledger keeps the
    # calls it already has.
    trigger = _message(gateway, "time please")
    request = TurnRequest(trigger.session_id, trigger.id, trigger.anchor_seq, user_id="bo")
    asked = len(fake_llm.chat_requests())
    outcome = Agent(gateway.runtime.agents, request).run()
    assert len(outcome.calls) == 1
    assert len(fake_llm.chat_requests()) == asked + 1
    rows = _rows(gateway)
    assert [r.call_key for r in rows] == [f"turn:{trigger.id}:main:0", f"turn:{trigger.id}:main:1"]
