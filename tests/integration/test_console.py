"""The console over real HTTP: its cookie, CSRF and scope refusals, tenant isolation, and
sessions that end with sign-out or with their key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from http.cookies import SimpleCookie
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from agent_core.admin import keys
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import ApiKey, AuditEvent, Compaction
from gateway.console.access import COOKIE_NAME
from tests.fixtures.console import SeededTenant, csrf_of, seed_tenant, sign_in
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import GatewayServer, free_port, hubbub_env, settings_from_env

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, gateway_factory: Callable[..., GatewayServer]
) -> GatewayServer:
    return gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )


@pytest.fixture
def tenants(gateway: GatewayServer) -> dict[str, SeededTenant]:
    with transaction(gateway.runtime.factory) as db:
        return {name: seed_tenant(db, name) for name in ("acme", "globex")}


@pytest.fixture
def operator_key(gateway: GatewayServer) -> str:
    with transaction(gateway.runtime.factory) as db:
        return keys.create(db, tenant_id=None, scope="admin").secret


@pytest.fixture
def browser(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.base_url, timeout=60) as c:
        yield c


def _session_cookie(response: httpx.Response) -> SimpleCookie:
    cookie = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{COOKIE_NAME}="):
            cookie.load(header)
    assert COOKIE_NAME in cookie, response.headers
    return cookie


def _restored(gateway: GatewayServer, compaction_id: int) -> bool:
    with read_transaction(gateway.runtime.factory) as db:
        compaction = db.get(Compaction, compaction_id)
        assert compaction is not None
        return compaction.restored


def _audit(gateway: GatewayServer, tenant: str) -> list[tuple[str, str]]:
    with read_transaction(gateway.runtime.factory) as db:
        events = db.scalars(select(AuditEvent).where(AuditEvent.tenant_id == tenant)).all()
        return [(e.action, e.actor) for e in events]


class TestSignIn:
    def test_the_cookie_is_http_only_strict_scoped_and_expiring(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        response = sign_in(browser, tenants["acme"].admin_key)
        assert response.status_code == 303
        assert response.headers["location"] == "/console/t/acme/bots"
        morsel = _session_cookie(response)[COOKIE_NAME]
        assert morsel["httponly"] is True
        assert morsel["samesite"].lower() == "strict"
        assert morsel["path"] == "/console"
        assert morsel["max-age"] == str(8 * 3600)
        assert not morsel["secure"]
        assert tenants["acme"].admin_key not in response.headers.get("set-cookie", "")
        page = browser.get("/console/t/acme/bots")
        assert page.status_code == 200
        assert "telegram-support" in page.text

    def test_behind_a_tls_proxy_the_cookie_is_secure(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        proxied = {"X-Forwarded-Proto": "https"}
        form = browser.get("/console/sign-in", headers=proxied)
        (sign_in_cookie,) = SimpleCookie(form.headers["set-cookie"]).values()
        assert sign_in_cookie["secure"] is True
        # A browser sends a Secure cookie only over HTTPS: the proxy's side of the hop.
        response = browser.post(
            "/console/sign-in",
            data={"key": tenants["acme"].admin_key, "token": sign_in_cookie.value},
            headers=proxied | {"Cookie": f"{sign_in_cookie.key}={sign_in_cookie.value}"},
        )
        assert response.status_code == 303
        assert _session_cookie(response)[COOKIE_NAME]["secure"] is True

    def test_a_wrong_key_is_refused_without_a_session(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        response = sign_in(browser, tenants["acme"].admin_key[:-2] + "xx")
        assert response.status_code == 401
        assert "Unknown or revoked API key" in response.text
        assert f"{COOKIE_NAME}=" not in response.headers.get("set-cookie", "")
        assert browser.get("/console/t/acme/bots").status_code == 303

    def test_a_sign_in_post_without_the_form_token_is_refused(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        response = browser.post(
            "/console/sign-in", data={"key": tenants["acme"].admin_key, "token": "forged"}
        )
        assert response.status_code == 403
        assert f"{COOKIE_NAME}=" not in response.headers.get("set-cookie", "")

    def test_pages_send_a_stranger_to_the_sign_in_form(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        for path in ("/console", "/console/tenants", "/console/t/acme/sessions"):
            response = browser.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"] == "/console/sign-in"


class TestWrites:
    def test_a_restore_without_the_csrf_token_changes_nothing(
        self, browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
    ) -> None:
        acme = tenants["acme"]
        sign_in(browser, acme.admin_key)
        path = f"/console/t/acme/sessions/{acme.session_id}/restore"
        for data in ({}, {"csrf": "not-the-token"}):
            refused = browser.post(path, data=data)
            assert refused.status_code == 403
            assert "did not come from the console" in refused.text
        assert not _restored(gateway, acme.compaction_id)
        assert ("session.restore", acme.admin_key[:12]) not in _audit(gateway, "acme")

    def test_a_restore_with_the_token_undoes_the_compaction_and_is_audited(
        self, browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
    ) -> None:
        acme = tenants["acme"]
        sign_in(browser, acme.admin_key)
        page = browser.get(f"/console/t/acme/sessions/{acme.session_id}")
        assert f"undo compaction #{acme.compaction_id}" in page.text
        assert "fallback used: deterministic digest" in page.text
        done = browser.post(
            f"/console/t/acme/sessions/{acme.session_id}/restore", data={"csrf": csrf_of(page)}
        )
        assert done.status_code == 303
        assert _restored(gateway, acme.compaction_id)
        assert ("session.restore", acme.admin_key[:12]) in _audit(gateway, "acme")
        after = browser.get(done.headers["location"])
        assert "The newest compaction was undone" in after.text
        assert 'id="restore"' not in after.text

    def test_a_read_key_sees_no_write_buttons_and_its_writes_are_refused(
        self, browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
    ) -> None:
        acme = tenants["acme"]
        sign_in(browser, acme.read_key)
        page = browser.get(f"/console/t/acme/sessions/{acme.session_id}")
        assert page.status_code == 200
        assert 'id="restore"' not in page.text
        keys_page = browser.get("/console/t/acme/keys")
        assert 'id="create-key"' not in keys_page.text
        assert "/revoke" not in keys_page.text
        csrf = csrf_of(page)
        refused = browser.post(
            f"/console/t/acme/sessions/{acme.session_id}/restore", data={"csrf": csrf}
        )
        assert refused.status_code == 403
        assert "read-only" in refused.text
        assert (
            browser.post("/console/t/acme/keys", data={"csrf": csrf, "scope": "admin"}).status_code
            == 403
        )
        assert (
            browser.post(
                f"/console/t/acme/keys/{acme.admin_key[:12]}/revoke", data={"csrf": csrf}
            ).status_code
            == 403
        )
        assert not _restored(gateway, acme.compaction_id)
        with read_transaction(gateway.runtime.factory) as db:
            assert len(keys.KeyRepository.from_session(db).list("acme")) == 2
        assert _audit(gateway, "acme") == []

    def test_a_created_key_is_shown_once_and_works(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        sign_in(browser, tenants["acme"].admin_key)
        page = browser.get("/console/t/acme/keys")
        created = browser.post(
            "/console/t/acme/keys", data={"csrf": csrf_of(page), "scope": "read"}
        )
        assert created.status_code == 201
        assert created.headers["cache-control"] == "no-store"
        secret = created.text.split('id="new-key">')[1].split("<")[0]
        assert secret.startswith("hbk_")
        assert secret not in browser.get("/console/t/acme/keys").text
        with httpx.Client(base_url=str(browser.base_url), timeout=60) as other:
            assert sign_in(other, secret).status_code == 303


def test_using_the_console_records_the_keys_last_use(
    browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
) -> None:
    prefix = tenants["acme"].read_key[:12]
    sign_in(browser, tenants["acme"].read_key)
    long_ago = utcnow() - timedelta(hours=2)
    with transaction(gateway.runtime.factory) as db:
        db.execute(update(ApiKey).where(ApiKey.prefix == prefix).values(last_used_at=long_ago))
    assert browser.get("/console/t/acme/sessions").status_code == 200
    with read_transaction(gateway.runtime.factory) as db:
        key = keys.KeyRepository.from_session(db).get_by_prefix(prefix)
        assert key is not None
        assert key.last_used_at is not None
        assert key.last_used_at > long_ago + timedelta(hours=1)


class TestScope:
    def test_a_tenant_key_sees_only_its_tenant(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        sign_in(browser, tenants["acme"].admin_key)
        listing = browser.get("/console/tenants")
        assert "acme" in listing.text
        assert "globex" not in listing.text.lower()
        globex = tenants["globex"]
        for path in (
            "/console/t/globex/bots",
            "/console/t/globex/sessions",
            f"/console/t/globex/sessions/{globex.session_id}",
            f"/console/t/acme/sessions/{globex.session_id}",
            "/console/t/globex/keys",
            "/console/t/globex/usage",
            "/console/t/globex/budgets",
            "/console/t/globex/settings",
            "/console/t/globex/audit",
        ):
            response = browser.get(path)
            assert response.status_code == 404, path
            assert "Globex" not in response.text

    def test_the_operator_sees_every_tenant(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant], operator_key: str
    ) -> None:
        response = sign_in(browser, operator_key)
        assert response.headers["location"] == "/console/tenants"
        listing = browser.get("/console/tenants").text
        assert "Acme Inc" in listing
        assert "Globex Inc" in listing
        assert browser.get("/console/t/globex/bots").status_code == 200


class TestSessionEnd:
    def test_sign_out_ends_the_session_on_the_server(
        self, browser: httpx.Client, tenants: dict[str, SeededTenant]
    ) -> None:
        sign_in(browser, tenants["acme"].admin_key)
        stolen = browser.cookies[COOKIE_NAME]
        page = browser.get("/console/t/acme/bots")
        out = browser.post("/console/sign-out", data={"csrf": csrf_of(page)})
        assert out.status_code == 303
        assert out.headers["location"] == "/console/sign-in"
        with httpx.Client(base_url=str(browser.base_url), timeout=60) as thief:
            thief.cookies.set(COOKIE_NAME, stolen, path="/console")
            assert thief.get("/console/t/acme/bots").status_code == 303

    def test_revoking_the_key_ends_its_session(
        self, browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
    ) -> None:
        acme = tenants["acme"]
        sign_in(browser, acme.read_key)
        assert browser.get("/console/t/acme/bots").status_code == 200
        with transaction(gateway.runtime.factory) as db:
            assert keys.revoke(db, acme.read_key[:12], tenant_id="acme") is not None
        response = browser.get("/console/t/acme/bots")
        assert response.status_code == 303
        assert response.headers["location"] == "/console/sign-in"


def test_sessions_in_redis_are_shared_by_every_gateway(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    first = gateway_factory(settings_from_env(env))
    second = gateway_factory(settings_from_env(env))
    with transaction(first.runtime.factory) as db:
        acme = seed_tenant(db, "acme")
    with httpx.Client(base_url=first.base_url, timeout=60) as one:
        sign_in(one, acme.admin_key)
        cookie = one.cookies[COOKIE_NAME]
    with httpx.Client(base_url=second.base_url, timeout=60) as two:
        two.cookies.set(COOKIE_NAME, cookie, path="/console")
        page = two.get("/console/t/acme/bots")
        assert page.status_code == 200
        assert "slack-support" in page.text


def test_without_its_session_store_the_console_says_so(
    postgres_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=nobody)
    gateway = gateway_factory(settings_from_env(env))
    with transaction(gateway.runtime.factory) as db:
        acme = seed_tenant(db, "acme")
    with httpx.Client(base_url=gateway.base_url, timeout=60) as browser:
        response = sign_in(browser, acme.admin_key)
        assert response.status_code == 503
        assert "the session store (Redis) is unavailable" in response.text
        assert f"{COOKIE_NAME}=" not in response.headers.get("set-cookie", "")
