"""The admin API over real HTTP: every route by every kind of key, and no data across tenants.

The route list comes from the app's own route table, so a new admin route joins the
matrix without touching this file (it only needs a request body below if it writes).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute

from agent_core.admin import keys
from agent_core.db.engine import transaction
from agent_core.db.models import (
    DEFAULT_TENANT_ID,
    Bot,
    Budget,
    ChatSession,
    Compaction,
    MemoryEntry,
    Message,
    Tenant,
    UsageRecord,
)
from gateway.routes.admin import PREFIX
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

TOKEN = "999999:never-shown-token"
CALLERS = ("none", "wrong", "foreign", "read", "admin", "operator")


@dataclass
class Seeded:
    """One tenant's objects, and the strings that must never reach another tenant."""

    tenant: str
    bot_id: int
    session_id: str
    keys: dict[str, str]
    secrets: tuple[str, ...]
    """Names, chat ids, contents: anything of this tenant's other than its path ids."""


def _seed(db: Session, tenant: str) -> Seeded:
    db.add(Tenant(id=tenant, name=f"{tenant} Inc", persona=f"{tenant}-persona"))
    db.flush()
    bot = Bot(
        tenant_id=tenant, platform="telegram", name=f"{tenant}bot", settings={}, credentials=None
    )
    db.add(bot)
    db.flush()
    session_id = uuid.uuid4().hex
    db.add(
        ChatSession(
            id=session_id,
            tenant_id=tenant,
            bot_id=bot.id,
            key=f"{tenant}/{bot.id}/telegram/{tenant}-chat",
            platform="telegram",
            chat_id=f"{tenant}-chat",
            active_tokens=12,
            active_count=1,
            compaction_count=1,
        )
    )
    db.flush()
    compaction = Compaction(
        session_id=session_id,
        trigger="manual",
        strategy="summary",
        tokens_before=100,
        tokens_after=20,
        archived_count=1,
        summary=f"{tenant}-summary",
        summary_version=1,
    )
    db.add(compaction)
    db.flush()
    db.add_all(
        [
            Message(
                session_id=session_id,
                bot_id=bot.id,
                seq=1,
                anchor_seq=1,
                role="user",
                content=f"{tenant}-archived-words",
                archived=True,
                compaction_id=compaction.id,
            ),
            Message(
                session_id=session_id,
                bot_id=bot.id,
                seq=2,
                anchor_seq=2,
                role="user",
                content=f"{tenant}-active-words",
            ),
            MemoryEntry(tenant_id=tenant, bot_id=bot.id, scope="bot", content=f"{tenant}-fact"),
            UsageRecord(
                call_key=f"{tenant}-call",
                tenant_id=tenant,
                bot_id=bot.id,
                session_id=session_id,
                chat_key=f"{tenant}/{bot.id}/telegram/{tenant}-chat",
                user_id=f"{tenant}-payer",
                model=f"openai/{tenant}-model",
                purpose="main",
                prompt_tokens=100,
                completion_tokens=10,
                cost_usd=0.5,
            ),
            Budget(tenant_id=tenant, scope="user", period="day", unit="tokens", amount=1000),
        ]
    )
    made = {
        "read": keys.create(db, tenant_id=tenant, scope="read").secret,
        "admin": keys.create(db, tenant_id=tenant, scope="admin").secret,
    }
    return Seeded(
        tenant=tenant,
        bot_id=bot.id,
        session_id=session_id,
        keys=made,
        secrets=(
            f"{tenant}bot",
            f"{tenant}-chat",
            f"{tenant}-persona",
            f"{tenant}-summary",
            f"{tenant}-archived-words",
            f"{tenant}-active-words",
            f"{tenant}-fact",
            f"{tenant}-payer",
            f"{tenant}-model",
            made["read"][:12],
            made["admin"][:12],
        ),
    )


@pytest.fixture
def gateway(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, gateway_factory: Callable[..., GatewayServer]
) -> GatewayServer:
    return gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )


@pytest.fixture
def client(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.base_url, timeout=60) as c:
        yield c


def _walk(routes: Iterable[BaseRoute]) -> Iterator[APIRoute]:
    """Every endpoint; FastAPI 0.165 keeps an included router whole, as one entry."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _walk(included.routes)


def _admin_routes(gateway: GatewayServer) -> list[tuple[str, str]]:
    routes = [
        (method, route.path)
        for route in _walk(gateway.app.routes)
        if route.path.startswith(PREFIX)
        for method in sorted(route.methods or ())
    ]
    assert len(routes) >= 19, routes
    return routes


def _body(method: str, path: str) -> dict[str, Any] | None:
    if path.endswith("/settings") and method == "PUT":
        return {"name": "Renamed", "persona": "a new persona"}
    if path.endswith("/bots") and method == "POST":
        return {
            "platform": "telegram",
            "name": f"new{uuid.uuid4().hex[:8]}",
            "credentials": {"token": TOKEN},
        }
    if path.endswith("/bots/{bot}") and method == "PUT":
        return {"trigger_mode": "all", "credentials": {"token": TOKEN}}
    if path.endswith("/keys") and method == "POST":
        return {"scope": "read"}
    if path.endswith("/budgets") and method == "PUT":
        return {"budgets": [{"scope": "chat", "period": "month", "unit": "usd", "amount": 5}]}
    return None


def _fill(path: str, target: Seeded, gateway: GatewayServer, method: str) -> str:
    """The path with ``target``'s ids; a DELETE gets a fresh object of its own to remove."""
    bot_id, prefix = target.bot_id, target.keys["read"][:12]
    if method == "DELETE":
        with transaction(gateway.runtime.factory) as db:
            spare = Bot(tenant_id=target.tenant, platform="slack", name=uuid.uuid4().hex[:12])
            db.add(spare)
            db.flush()
            bot_id = spare.id
            prefix = keys.create(db, tenant_id=target.tenant, scope="read").key.prefix
    values = {
        "tenant": target.tenant,
        "bot": str(bot_id),
        "session_id": target.session_id,
        "prefix": prefix,
    }
    filled = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
    assert "{" not in filled, filled
    return filled


def _named(values: dict[str, str], match: re.Match[str]) -> str:
    return values[match.group(1)]


def _expected(caller: str, method: str, path: str) -> set[int]:
    writes = method != "GET"
    if caller in ("none", "wrong"):
        return {401}
    if path == f"{PREFIX}/tenants":
        return {200}
    if caller == "foreign":
        return {404}
    if caller == "read" and writes:
        return {403}
    return {200, 201, 204}


def test_every_admin_route_answers_each_key_as_scoped_and_never_leaks(
    gateway: GatewayServer, client: httpx.Client
) -> None:
    with transaction(gateway.runtime.factory) as db:
        a, b = _seed(db, "acme"), _seed(db, "beta")
        operator = keys.create(db, tenant_id=None, scope="admin").secret
    routes = _admin_routes(gateway)
    checked = 0
    for own, other in ((a, b), (b, a)):
        secrets_of = {
            "none": None,
            "wrong": own.keys["admin"][:-4] + "AAAA",
            "foreign": other.keys["admin"],
            "read": own.keys["read"],
            "admin": own.keys["admin"],
            "operator": operator,
        }
        for method, path in routes:
            for caller in CALLERS:
                secret = secrets_of[caller]
                headers = {"Authorization": f"Bearer {secret}"} if secret else {}
                url = _fill(path, own, gateway, method)
                response = client.request(method, url, headers=headers, json=_body(method, path))
                expected = _expected(caller, method, path)
                assert response.status_code in expected, (caller, method, url, response.text)
                if response.status_code == 401:
                    assert response.headers["www-authenticate"] == "Bearer"
                assert TOKEN not in response.text
                if caller != "operator" or path != f"{PREFIX}/tenants":
                    leaked = [s for s in other.secrets if s in response.text]
                    assert not leaked, (caller, method, url, leaked)
                if caller in ("read", "admin"):
                    assert other.tenant not in response.text, (caller, method, url)
                    assert other.session_id not in response.text, (caller, method, url)
                if caller == "foreign":
                    leaked = [s for s in own.secrets if s in response.text]
                    assert not leaked, (caller, method, url, leaked)
                checked += 1
    assert checked == 2 * len(routes) * len(CALLERS)

    # The other tenant's object ids under one's own tenant are not found either.
    for own, other in ((a, b), (b, a)):
        auth = {"Authorization": f"Bearer {own.keys['admin']}"}
        ids = {"bot": str(other.bot_id), "session_id": other.session_id}
        ids["prefix"] = other.keys["read"][:12]
        for method, path in routes:
            if not re.search(r"\{(bot|session_id|prefix)\}", path):
                continue
            names = ids | {"tenant": own.tenant}
            url = re.sub(r"\{(\w+)\}", partial(_named, names), path)
            response = client.request(method, url, headers=auth, json=_body(method, path))
            assert response.status_code == 404, (method, url, response.text)
            assert not [s for s in other.secrets if s in response.text], (method, url)


def test_every_admin_route_declares_bearer_security(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    admin_paths = {p: ops for p, ops in spec["paths"].items() if p.startswith(PREFIX)}
    assert len(admin_paths) >= 12
    for path, ops in admin_paths.items():
        for method, op in ops.items():
            assert op.get("security") == [{"HTTPBearer": []}], (method, path)


def test_a_bot_s_busy_mode_is_set_on_create_and_update_and_checked(
    gateway: GatewayServer, client: httpx.Client
) -> None:
    with transaction(gateway.runtime.factory) as db:
        db.add(Tenant(id="acme", name="Acme"))
        db.flush()
        admin = keys.create(db, tenant_id="acme", scope="admin")
    auth = {"Authorization": f"Bearer {admin.secret}"}
    bots = f"{PREFIX}/tenants/acme/bots"
    body = {"platform": "telegram", "name": "ops", "credentials": {"token": TOKEN}}
    refused = client.post(bots, json=body | {"busy_mode": "frantic"}, headers=auth)
    assert refused.status_code == 422
    assert "busy mode 'frantic' is unknown" in refused.text
    assert client.get(bots, headers=auth).json() == []

    created = client.post(bots, json=body, headers=auth)
    assert created.status_code == 201, created.text
    bot = created.json()
    assert bot["busy_mode"] is None, "a bot without its own inherits its tenant's"
    changed = client.put(f"{bots}/{bot['id']}", json={"busy_mode": "interrupt"}, headers=auth)
    assert changed.status_code == 200, changed.text
    assert client.get(f"{bots}/{bot['id']}", headers=auth).json()["busy_mode"] == "interrupt"
    with transaction(gateway.runtime.factory) as db:
        assert db.scalars(select(Bot.busy_mode).where(Bot.name == "ops")).one() == "interrupt"


def test_bots_keep_credentials_write_only_and_every_change_is_audited(
    gateway: GatewayServer, client: httpx.Client
) -> None:
    with transaction(gateway.runtime.factory) as db:
        db.add(Tenant(id="acme", name="Acme"))
        db.flush()
        admin = keys.create(db, tenant_id="acme", scope="admin")
    auth = {"Authorization": f"Bearer {admin.secret}"}
    bots = f"{PREFIX}/tenants/acme/bots"

    bad = [
        ({"platform": "telegram", "name": "x", "credentials": {"token": TOKEN}, "owner": 1}, 422),
        ({"platform": "irc", "name": "x", "credentials": {"token": TOKEN}}, 400),
        ({"platform": "telegram", "name": "x"}, 422),
        ({"platform": "telegram", "name": "x y", "credentials": {"token": TOKEN}}, 422),
    ]
    for body, status in bad:
        response = client.post(bots, json=body, headers=auth)
        assert response.status_code == status, response.text
        assert "error" in response.json()
    assert client.get(bots, headers=auth).json() == []

    created = client.post(
        bots,
        json={"platform": "telegram", "name": "support", "credentials": {"token": TOKEN}},
        headers=auth,
    )
    assert created.status_code == 201, created.text
    bot = created.json()
    assert bot["has_credentials"] is True
    rotated = client.put(
        f"{bots}/{bot['id']}",
        json={"credentials": {"token": "999999:rotated"}, "allow_chats": ["42"]},
        headers=auth,
    )
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["allow_chats"] == ["42"]
    assert "rotated" not in rotated.text
    with transaction(gateway.runtime.factory) as db:
        stored = db.scalars(select(Bot).where(Bot.name == "support")).one()
        assert stored.credentials is not None
        assert TOKEN not in stored.credentials
        assert "rotated" not in stored.credentials
    assert (
        client.put(f"{bots}/{bot['id']}", json={"trigger_mode": "loud"}, headers=auth).status_code
        == 422
    )
    assert client.delete(f"{bots}/{bot['id']}", headers=auth).status_code == 204

    events = client.get(f"{PREFIX}/tenants/acme/audit", headers=auth).json()
    assert [e["action"] for e in events] == ["bot.delete", "bot.update", "bot.create"]
    assert all(e["actor"] == admin.secret[:12] for e in events)
    assert events[1]["before"]["allow_chats"] == []
    assert events[1]["after"]["allow_chats"] == ["42"]
    assert TOKEN not in str(events)
    assert "rotated" not in str(events).replace("credentials_rotated", "")


def test_a_persona_put_over_the_api_shapes_the_next_turn(
    gateway: GatewayServer, client: httpx.Client, fake_llm: FakeLLM
) -> None:
    with transaction(gateway.runtime.factory) as db:
        admin = keys.create(db, tenant_id=DEFAULT_TENANT_ID, scope="admin").secret
    auth = {"Authorization": f"Bearer {admin}"}
    post_accepted(client, "persona-check", "hello", user="ann")
    wait_replies(client, "persona-check", 1)

    url = f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/settings"
    new: dict[str, Any] = {
        "name": "Default tenant",
        "persona": "You are Quillon, the lighthouse keeper.",
    }
    response = client.put(url, json=new, headers=auth)
    assert response.status_code == 200, response.text
    unset = dict.fromkeys(
        (
            "instructions",
            "trigger_mode",
            "allow_users",
            "allow_chats",
            "tools",
            "busy_mode",
            "compression_threshold",
            "hygiene_threshold",
            "models",
            "default_model",
        )
    )
    new |= unset
    assert client.get(url, headers=auth).json() == new | {"mcp_servers": []}
    assert client.put(url, json=new | {"model": "x"}, headers=auth).status_code == 422
    (event,) = client.get(f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/audit", headers=auth).json()
    assert (event["action"], event["actor"]) == ("settings.update", admin[:12])
    assert event["before"]["persona"] is None
    assert event["after"] == new

    fake_llm.reset()
    post_accepted(client, "persona-check", "who are you?", user="ann")
    wait_replies(client, "persona-check", 2)
    system = fake_llm.chat_requests()[-1]["messages"][0]["content"]
    assert "You are Quillon, the lighthouse keeper." in system


def test_sessions_show_gauge_compactions_archive_and_restore_is_audited(
    gateway: GatewayServer, client: httpx.Client
) -> None:
    with transaction(gateway.runtime.factory) as db:
        acme = _seed(db, "acme")
    auth = {"Authorization": f"Bearer {acme.keys['admin']}"}
    base = f"{PREFIX}/tenants/acme/sessions"

    listed = client.get(base, params={"platform": "telegram", "chat": "acme-chat"}, headers=auth)
    assert [s["id"] for s in listed.json()] == [acme.session_id]
    assert client.get(base, params={"chat": "elsewhere"}, headers=auth).json() == []

    detail = client.get(f"{base}/{acme.session_id}", headers=auth).json()
    gauge = detail["gauge"]
    assert gauge["stored_tokens"] == 12
    assert gauge["window"] == 128000
    assert 0 < gauge["threshold"] < gauge["hygiene"] < gauge["window"]
    assert gauge["compaction_count"] == 1

    (compaction,) = client.get(f"{base}/{acme.session_id}/compactions", headers=auth).json()
    assert (compaction["tokens_before"], compaction["tokens_after"]) == (100, 20)
    assert "+acme-summary" in compaction["summary_diff"]
    found = client.get(f"{base}/{acme.session_id}/archive", params={"q": "archived"}, headers=auth)
    assert [m["content"] for m in found.json()] == ["acme-archived-words"]

    restored = client.post(f"{base}/{acme.session_id}/restore", headers=auth)
    assert restored.status_code == 200, restored.text
    assert restored.json() == {"compaction_id": compaction["id"], "messages_back": 1}
    messages = client.get(f"{base}/{acme.session_id}/messages", headers=auth).json()
    assert [m["archived"] for m in messages] == [False, False]
    again = client.post(f"{base}/{acme.session_id}/restore", headers=auth).json()
    assert again == {"compaction_id": None, "messages_back": 0}

    memory = client.get(f"{PREFIX}/tenants/acme/memory", headers=auth).json()
    assert [m["content"] for m in memory] == ["acme-fact"]

    made = client.post(f"{PREFIX}/tenants/acme/keys", json={"scope": "read"}, headers=auth)
    assert made.status_code == 201, made.text
    new_key = made.json()["key"]
    listed_keys = client.get(f"{PREFIX}/tenants/acme/keys", headers=auth).text
    assert new_key[:12] in listed_keys
    assert new_key not in listed_keys
    read = {"Authorization": f"Bearer {new_key}"}
    assert client.get(f"{base}/{acme.session_id}", headers=read).status_code == 200
    refused = client.post(f"{base}/{acme.session_id}/restore", headers=read)
    assert refused.status_code == 403
    assert refused.json() == {"error": "this key is read-only"}
    (used,) = [
        k
        for k in client.get(f"{PREFIX}/tenants/acme/keys", headers=auth).json()
        if k["prefix"] == new_key[:12]
    ]
    assert used["last_used_at"] is not None
    revoked = client.delete(f"{PREFIX}/tenants/acme/keys/{new_key[:12]}", headers=auth)
    assert revoked.json()["revoked_at"] is not None
    assert client.get(base, headers=read).status_code == 401

    actions = [e["action"] for e in client.get(f"{PREFIX}/tenants/acme/audit", headers=auth).json()]
    assert actions == ["key.revoke", "key.create", "session.restore"]


def test_new_via_the_api_starts_a_fresh_session_and_keeps_the_old_one(
    gateway: GatewayServer, client: httpx.Client
) -> None:
    with transaction(gateway.runtime.factory) as db:
        acme = _seed(db, "acme")
    auth = {"Authorization": f"Bearer {acme.keys['admin']}"}
    read = {"Authorization": f"Bearer {acme.keys['read']}"}
    url = f"{PREFIX}/tenants/acme/sessions/{acme.session_id}/new"

    assert client.post(url, headers=read).status_code == 403
    made = client.post(url, headers=auth)
    assert made.status_code == 201, made.text
    fresh = made.json()["session_id"]
    assert made.json()["previous_session_id"] == acme.session_id
    assert fresh != acme.session_id

    with gateway.runtime.factory() as db:
        old, new = db.get(ChatSession, acme.session_id), db.get(ChatSession, fresh)
        assert old is not None
        assert new is not None
        assert (old.is_current, old.ended_at is not None) == (False, True)
        assert (new.is_current, new.chat_id, new.bot_id) == (True, "acme-chat", acme.bot_id)
    kept = client.get(f"{PREFIX}/tenants/acme/sessions/{acme.session_id}/messages", headers=auth)
    assert [m["content"] for m in kept.json()] == ["acme-archived-words", "acme-active-words"]
    actions = [e["action"] for e in client.get(f"{PREFIX}/tenants/acme/audit", headers=auth).json()]
    assert actions == ["session.new"]
    missing = client.post(f"{PREFIX}/tenants/acme/sessions/{'0' * 32}/new", headers=auth)
    assert missing.status_code == 404
