"""Inbound rate limits through the real web chat: stored, not answered, told once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from agent_core.db.models import Message, MessageKind
from agent_core.db.models.message import TurnState
from agent_core.notices import RATE_LIMITED
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration


def post(client: httpx.Client, user: str, text: str) -> None:
    response = client.post("/api/webchat/flood/messages", json={"text": text, "user": user})
    assert response.status_code == 202, response.text


def counts(gateway: GatewayServer) -> dict[str, int]:
    with gateway.runtime.factory() as db:
        users = db.scalar(select(func.count()).where(Message.role == "user")) or 0
        pending = db.scalar(select(func.count()).where(Message.turn_state == TurnState.PENDING))
        notices = db.scalars(select(Message.content).where(Message.kind == MessageKind.NOTICE))
        return {"users": users, "pending": pending or 0, "notices": len(list(notices))}


def test_a_flood_is_stored_answered_within_the_limit_and_told_once(
    db_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        rate_limit_user="5/hour",
        rate_limit_chat="off",
    )
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        for i in range(30):
            post(client, "ann", f"ann says {i}")
        for i in range(3):
            post(client, "bob", f"bob says {i}")
    done = wait_until(
        lambda: (c := counts(gateway))["pending"] == 0 and c["users"] == 33 and c,
        timeout=120,
        what="every message stored and every allowed turn answered",
    )
    assert done["notices"] == 1
    # Ann's first five and Bob's three reach the model; the rest are context only.
    assert len(fake_llm.chat_requests()) == 8
    with gateway.runtime.factory() as db:
        notice = db.scalars(select(Message.content).where(Message.kind == MessageKind.NOTICE))
        assert list(notice) == [RATE_LIMITED]
    last = fake_llm.chat_requests()[-1]["messages"]
    assert any("ann says 29" in str(m.get("content")) for m in last), (
        "a limited message stays in the transcript the model reads"
    )


def test_gateways_sharing_redis_share_the_counters(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=None,
        redis_url=redis_url,
        rate_limit_user="4/hour",
        rate_limit_chat="off",
    )
    first = gateway_factory(settings_from_env(env))
    second = gateway_factory(settings_from_env(env))
    with (
        httpx.Client(base_url=first.base_url, timeout=30) as one,
        httpx.Client(base_url=second.base_url, timeout=30) as two,
    ):
        for i in range(10):
            post(one if i % 2 else two, "ann", f"message {i}")
    with first.runtime.factory() as db:
        rows = db.execute(
            select(Message.turn_state, Message.meta).where(Message.role == "user")
        ).all()
    assert len(rows) == 10
    asked = [state for state, _ in rows if state == TurnState.PENDING]
    told = [meta for _, meta in rows if meta.get("rate_limited")]
    # No worker runs here: four turns and one notice wait; five messages are context.
    assert (len(asked), len(told)) == (5, 1)
