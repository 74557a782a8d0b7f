"""A caller's W3C ``traceparent`` is continued on webhook, web chat and admin requests:
the message a request brings belongs to the caller's trace, end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent_core.admin import keys
from agent_core.db.engine import transaction
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
    wait_until,
)
from tests.fixtures.traces import LocalSpans, SeenSpan, children, named

pytestmark = pytest.mark.integration

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = {"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    local_spans: LocalSpans,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm)
    return gateway_factory(settings_from_env(env))


def _request_span(spans: list[SeenSpan], name: str) -> SeenSpan:
    (found,) = [s for s in named(spans, name) if s.trace_id == TRACE_ID]
    assert found.parent_id == CALLER_SPAN, "continues the caller's span"
    return found


def _ended(local_spans: LocalSpans, name: str, count: int = 1) -> list[SeenSpan]:
    """The request spans, once ended (a span ends just after its response is sent)."""
    found: list[SeenSpan] = wait_until(
        lambda: len(s := named(local_spans.seen(), name)) >= count and s, what=name
    )
    return found


def test_a_web_chat_message_continues_the_callers_trace_through_its_turn(
    gateway: GatewayServer, local_spans: LocalSpans
) -> None:
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        response = client.post(
            "/api/webchat/traced/messages", json={"text": "hello"}, headers=TRACEPARENT
        )
        assert response.status_code == 202, response.text
        wait_replies(client, "traced", 1)
        untraced = post_accepted(client, "untraced", "hello again").json()
        wait_replies(client, "untraced", 1)
    spans = wait_until(
        lambda: (s := local_spans.seen()) and len(named(s, "hubbub.turn")) == 2 and s,
        what="both turns",
    )
    request = _request_span(spans, "POST /api/webchat/")
    assert request.attributes["http.response.status_code"] == 202
    (inbound,) = children(spans, request, "hubbub.inbound")
    assert inbound.attributes["hubbub.message_id"] == int(response.json()["id"])
    (turn,) = children(spans, inbound, "hubbub.turn")
    assert turn.trace_id == TRACE_ID
    (other,) = [
        s
        for s in named(spans, "hubbub.inbound")
        if s.attributes["hubbub.message_id"] == int(untraced["id"])
    ]
    assert (other.parent_id, other.trace_id != TRACE_ID) == (None, True), "no header: new trace"


def test_admin_requests_are_spans_continuing_the_caller(
    gateway: GatewayServer, local_spans: LocalSpans
) -> None:
    with transaction(gateway.runtime.factory) as db:
        secret = keys.create(db, tenant_id=None, scope="admin").secret
    auth = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        assert client.get("/api/admin/v1/tenants", headers=auth | TRACEPARENT).status_code == 200
        assert client.get("/api/admin/v1/tenants").status_code == 401
    spans = _ended(local_spans, "GET /api/admin/", 2)
    traced = _request_span(spans, "GET /api/admin/")
    assert traced.attributes["http.response.status_code"] == 200
    (untraced,) = [s for s in spans if s.trace_id != TRACE_ID]
    assert untraced.parent_id is None
    assert untraced.attributes["http.response.status_code"] == 401
    assert all(secret not in str(s.attributes) for s in spans)


def test_a_webhook_request_continues_the_callers_trace(
    gateway: GatewayServer, local_spans: LocalSpans
) -> None:
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        response = client.post("/webhooks/slack/nobody", content=b"{}", headers=TRACEPARENT)
    assert response.status_code == 404
    request = _request_span(_ended(local_spans, "POST /webhooks/"), "POST /webhooks/")
    assert request.attributes["http.response.status_code"] == 404
