"""Per-tenant counters (turns, tokens, cost, refusals; the tenant the only label) on the
embedded gateway's /metrics and on a Celery worker's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID
from agent_core.usage.repository import UsageRepository
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    free_port,
    hubbub_env,
    post_accepted,
    settings_from_env,
    start_worker,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration

TENANT_SERIES = (
    "hubbub_tenant_turns_total",
    "hubbub_tenant_prompt_tokens_total",
    "hubbub_tenant_completion_tokens_total",
    "hubbub_tenant_cost_usd_total",
    "hubbub_tenant_budget_refusals_total",
)


def _tenant_samples(text: str) -> dict[str, float]:
    """The per-tenant series of the default tenant; fails if any has another label."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in TENANT_SERIES:
                assert set(sample.labels) == {"tenant"}, sample
                if sample.labels["tenant"] == DEFAULT_TENANT_ID:
                    found[sample.name] = sample.value
    return found


def _costs(tmp_path: Path) -> Path:
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"openai/fake-model": {"input": 0.001, "output": 0.002}}))
    return path


def test_the_embedded_gateway_counts_turns_tokens_cost_and_refusals_per_tenant(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, model_costs=_costs(tmp_path))
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        before = _tenant_samples(client.get("/metrics").text)
        post_accepted(client, "m", "count me", user="ann")
        wait_replies(client, "m", 1)
        with transaction(gateway.runtime.factory) as db:
            UsageRepository.from_session(db).set_budget(
                DEFAULT_TENANT_ID, "tenant", "day", "usd", 0
            )
        post_accepted(client, "m", "refuse me", user="ann")
        wait_replies(client, "m", 2)
        after = _tenant_samples(client.get("/metrics").text)

    (usage,) = fake_llm.usages
    grew = {name: after.get(name, 0) - before.get(name, 0) for name in TENANT_SERIES}
    assert grew["hubbub_tenant_turns_total"] == 2
    assert grew["hubbub_tenant_prompt_tokens_total"] == usage["prompt_tokens"]
    assert grew["hubbub_tenant_completion_tokens_total"] == usage["completion_tokens"]
    assert grew["hubbub_tenant_cost_usd_total"] == pytest.approx(
        usage["prompt_tokens"] * 0.001 + usage["completion_tokens"] * 0.002
    )
    assert grew["hubbub_tenant_budget_refusals_total"] == 1


def test_a_worker_serves_the_tenant_counters_of_the_turns_it_ran(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    port = free_port()
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        redis_url=redis_url,
        model_costs=_costs(tmp_path),
    ) | {"HUBBUB_WORKER_METRICS_PORT": str(port)}
    gateway = gateway_factory(settings_from_env(env))
    processes.append(start_worker(env))
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        post_accepted(client, "w", "through a worker", user="ann")
        wait_replies(client, "w", 1, timeout=120)
    (usage,) = fake_llm.usages
    served = wait_until(
        lambda: (
            (s := _tenant_samples(httpx.get(f"http://127.0.0.1:{port}/metrics").text))
            and s.get("hubbub_tenant_turns_total") == 1
            and s
        ),
        timeout=60,
        what="the worker's tenant counters",
    )
    assert served["hubbub_tenant_prompt_tokens_total"] == usage["prompt_tokens"]
    assert served["hubbub_tenant_completion_tokens_total"] == usage["completion_tokens"]
    assert served["hubbub_tenant_cost_usd_total"] == pytest.approx(
        usage["prompt_tokens"] * 0.001 + usage["completion_tokens"] * 0.002
    )
