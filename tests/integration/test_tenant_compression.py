"""A tenant's compression thresholds, put over the admin API, move its sessions' compactions.

A 300,000-token window keeps both lines above the 64,000-token floor: the deployment
compacts at 149,500 tokens (0.5), the tenant at 89,700 (0.3). About 93,000 tokens of group
chatter are then over the tenant's lines and well under the deployment's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from adapters.messages import InboundMessage
from agent_core.admin import keys
from agent_core.compaction.triggers import Trigger
from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID, ChatSession, Compaction
from gateway.routes.admin import PREFIX
from tests.fixtures.llm_server import FakeLLM, is_summary_request
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

WINDOW = 300_000
OUTPUT = 1_000
TENANT_LINE = 89_700
DEPLOYMENT_LINE = 149_500
MESSAGES = 14
SENTENCE = "The deploy of build {i} to staging finished; Alice checked /var/log/app{i}.log. "


def chatter(i: int) -> str:
    return (SENTENCE.format(i=i) * 350).strip()  # about 6,650 tokens


@pytest.fixture
def gateway(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, gateway_factory: Callable[..., GatewayServer]
) -> GatewayServer:
    env = hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        context_length=WINDOW,
        max_output_tokens=OUTPUT,
    )
    return gateway_factory(settings_from_env(env))


@pytest.fixture
def admin(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with transaction(gateway.runtime.factory) as db:
        secret = keys.create(db, tenant_id=DEFAULT_TENANT_ID, scope="admin").secret
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=gateway.base_url, timeout=60, headers=headers) as client:
        yield client


def say(gateway: GatewayServer, chat: str, i: int, text: str, *, addressed: bool = False) -> Any:
    return gateway.runtime.intake.accept(
        InboundMessage(
            platform="webchat",
            chat_id=chat,
            chat_type="group",
            message_id=f"{chat}-{i}",
            sender_id=f"u{i % 3}",
            sender_name=["Alice", "Bob", "Chen"][i % 3],
            text=text,
            addressed=addressed,
        )
    )


def compactions_of(gateway: GatewayServer, session_id: str) -> list[Compaction]:
    with transaction(gateway.runtime.factory) as db:
        found = select(Compaction).where(Compaction.session_id == session_id)
        return list(db.scalars(found.order_by(Compaction.id)))


def chat_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake.chat_requests() if not is_summary_request(r)]


def put_thresholds(admin: httpx.Client, **thresholds: float | None) -> httpx.Response:
    url = f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/settings"
    current = admin.get(url).json()
    current.pop("mcp_servers")
    return admin.put(url, json=current | thresholds)


def test_a_tenant_at_0_3_compacts_where_the_deployment_would_not(
    gateway: GatewayServer, admin: httpx.Client, fake_llm: FakeLLM
) -> None:
    for i in range(MESSAGES):
        before = say(gateway, "before", i, chatter(i))
    with transaction(gateway.runtime.factory) as db:
        stored = db.get(ChatSession, before.session_id)
        assert stored is not None
        assert TENANT_LINE < stored.active_tokens < DEPLOYMENT_LINE * 0.9
    gauge = admin.get(f"{PREFIX}/tenants/default/sessions/{before.session_id}").json()["gauge"]
    assert gauge["threshold"] == DEPLOYMENT_LINE

    response = put_thresholds(admin, compression_threshold=0.3)
    assert response.status_code == 200, response.text
    assert response.json()["compression_threshold"] == 0.3
    (event,) = admin.get(f"{PREFIX}/tenants/default/audit").json()
    assert (event["before"]["compression_threshold"], event["after"]["compression_threshold"]) == (
        None,
        0.3,
    )
    gauge = admin.get(f"{PREFIX}/tenants/default/sessions/{before.session_id}").json()["gauge"]
    assert gauge["threshold"] == TENANT_LINE

    # Between turns: the same chatter now crosses the tenant's background line.
    for i in range(MESSAGES):
        after = say(gateway, "after", i, chatter(i))
    found = wait_until(
        lambda: compactions_of(gateway, after.session_id), timeout=120, what="a compaction"
    )
    assert [c.trigger for c in found] == [Trigger.BACKGROUND]
    assert compactions_of(gateway, before.session_id) == [], "no message rang for it"

    # On the reply path: the question's preflight compacts the chat stored at 0.5.
    say(gateway, "before", MESSAGES, "@bot which build went out last?", addressed=True)
    wait_until(lambda: chat_requests(fake_llm), timeout=120, what="the answer")
    assert [c.trigger for c in compactions_of(gateway, before.session_id)] == [Trigger.PREFLIGHT]
    (request,) = chat_requests(fake_llm)
    assert fake_llm.counter.count_messages(request["messages"]) < TENANT_LINE


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ({"compression_threshold": 1.5}, "compression_threshold: Input should be less than 1"),
        ({"hygiene_threshold": 0}, "hygiene_threshold: Input should be greater than 0"),
        ({"compression_threshold": 0.9}, "hygiene_threshold 0.85 is below compression_threshold"),
        (
            {"compression_threshold": 0.6, "hygiene_threshold": 0.55},
            "hygiene_threshold 0.55 is below compression_threshold 0.6",
        ),
    ],
)
def test_thresholds_that_could_not_run_are_refused_and_change_nothing(
    admin: httpx.Client, thresholds: dict[str, float], message: str
) -> None:
    url = f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/settings"
    before = admin.get(url).json()
    response = put_thresholds(admin, **thresholds)
    assert response.status_code == 422, response.text
    assert message in response.text
    assert admin.get(url).json() == before
    assert admin.get(f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/audit").json() == []
