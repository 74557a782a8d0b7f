"""The console's settings page over real HTTP: edited with the CSRF token by admin keys,
read-only for read keys, bad input refused with its reason and nothing changed, audited."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_core.admin import operations
from agent_core.db.engine import read_transaction
from agent_core.db.engine import transaction as write_transaction
from agent_core.db.models import AuditEvent, Tenant
from tests.fixtures.console import SeededTenant, csrf_of, seed_tenant, sign_in
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env

pytestmark = pytest.mark.integration

PATH = "/console/t/acme/settings"
FORM = {
    "name": "Acme Support",
    "persona": "You are Acme's patient support assistant.",
    "instructions": "Answer in English.",
    "trigger_mode": "all",
    "busy_mode": "queue",
    "allow_users": "U1\nU2, U3",
    "allow_chats": "",
    "tools": "memory\ncurrent_time",
    "compression_threshold": "0.4",
    "hygiene_threshold": "0.9",
    "models": "openai/fake-model",
    "default_model": "openai/fake-model",
}


@pytest.fixture
def gateway(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, gateway_factory: Callable[..., GatewayServer]
) -> GatewayServer:
    return gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )


@pytest.fixture
def tenants(gateway: GatewayServer) -> dict[str, SeededTenant]:
    with write_transaction(gateway.runtime.factory) as db:
        return {name: seed_tenant(db, name) for name in ("acme", "globex")}


@pytest.fixture
def browser(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.base_url, timeout=60) as c:
        yield c


def _stored(gateway: GatewayServer, tenant: str = "acme") -> dict[str, Any]:
    with read_transaction(gateway.runtime.factory) as db:
        found = db.get(Tenant, tenant)
        assert found is not None
        return operations.describe_settings(found)


def _audited(gateway: GatewayServer) -> list[AuditEvent]:
    with read_transaction(gateway.runtime.factory) as db:
        return list(
            db.scalars(
                select(AuditEvent).where(
                    AuditEvent.tenant_id == "acme", AuditEvent.action == "settings.update"
                )
            )
        )


def test_an_admin_key_edits_the_settings_and_the_change_is_audited(
    browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
) -> None:
    acme = tenants["acme"]
    sign_in(browser, acme.admin_key)
    form = browser.get(PATH)
    assert form.status_code == 200
    assert 'value="Acme Inc"' in form.text
    assert 'id="save-settings"' in form.text
    assert "<fieldset>" in form.text

    saved = browser.post(PATH, data=FORM | {"csrf": csrf_of(form)})
    assert saved.status_code == 303
    assert saved.headers["location"] == f"{PATH}?notice=saved"
    assert _stored(gateway) == {
        "name": "Acme Support",
        "persona": "You are Acme's patient support assistant.",
        "instructions": "Answer in English.",
        "trigger_mode": "all",
        "busy_mode": "queue",
        "allow_users": ["U1", "U2", "U3"],
        "allow_chats": None,
        "tools": ["memory", "current_time"],
        "compression_threshold": 0.4,
        "hygiene_threshold": 0.9,
        "models": ["openai/fake-model"],
        "default_model": "openai/fake-model",
    }
    (event,) = _audited(gateway)
    assert event.actor == acme.admin_key[:12]
    assert event.before is not None
    assert event.before["name"] == "Acme Inc"
    assert event.after is not None
    assert event.after["allow_users"] == ["U1", "U2", "U3"]

    shown = browser.get(saved.headers["location"])
    assert "The settings are saved" in shown.text
    assert "U1\nU2\nU3</textarea>" in shown.text
    assert '<option value="all" selected>' in shown.text
    # The API reads the same settings.
    api = browser.get(
        "/api/admin/v1/tenants/acme/settings",
        headers={"Authorization": f"Bearer {acme.admin_key}"},
    )
    assert api.json()["allow_users"] == ["U1", "U2", "U3"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"compression_threshold": "half"}, "compression threshold must be a share"),
        ({"compression_threshold": "1.5"}, "compression_threshold 1.5 is out of range"),
        ({"hygiene_threshold": "0.3"}, "the safety net must not start before the compressor"),
        ({"trigger_mode": "always"}, "trigger mode must be one of mention, all, commands"),
        ({"busy_mode": "panic"}, "busy mode &#39;panic&#39; is unknown"),
        ({"tools": "memory\nbad/tool"}, "tool pattern &#39;bad/tool&#39; is invalid"),
        ({"name": "  "}, "name must not be empty"),
        (
            {"models": "openai/fake-model\nnot/offered"},
            "model &#39;not/offered&#39; is not offered",
        ),
        ({"default_model": "not/offered"}, "model &#39;not/offered&#39; is not offered"),
    ],
)
def test_bad_input_shows_why_keeps_what_was_typed_and_changes_nothing(
    browser: httpx.Client,
    gateway: GatewayServer,
    tenants: dict[str, SeededTenant],
    change: dict[str, str],
    message: str,
) -> None:
    sign_in(browser, tenants["acme"].admin_key)
    before = _stored(gateway)
    form = browser.get(PATH)
    refused = browser.post(PATH, data=FORM | change | {"csrf": csrf_of(form)})
    assert refused.status_code == 400
    assert message in refused.text
    assert 'id="error"' in refused.text
    assert "You are Acme&#39;s patient support assistant." in refused.text, "kept as typed"
    assert _stored(gateway) == before
    assert _audited(gateway) == []


def test_a_post_without_the_csrf_token_changes_nothing(
    browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
) -> None:
    sign_in(browser, tenants["acme"].admin_key)
    before = _stored(gateway)
    for data in (FORM, FORM | {"csrf": "forged"}):
        refused = browser.post(PATH, data=data)
        assert refused.status_code == 403
        assert "did not come from the console" in refused.text
    assert _stored(gateway) == before
    assert _audited(gateway) == []


def test_a_read_key_sees_the_settings_read_only_and_its_write_is_refused(
    browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
) -> None:
    sign_in(browser, tenants["acme"].read_key)
    form = browser.get(PATH)
    assert form.status_code == 200
    assert 'value="Acme Inc"' in form.text
    assert "<fieldset disabled>" in form.text
    assert 'id="save-settings"' not in form.text
    before = _stored(gateway)
    refused = browser.post(PATH, data=FORM | {"csrf": csrf_of(form)})
    assert refused.status_code == 403
    assert "read-only" in refused.text
    assert _stored(gateway) == before
    assert _audited(gateway) == []


def test_a_tenant_key_cannot_read_or_write_another_tenants_settings(
    browser: httpx.Client, gateway: GatewayServer, tenants: dict[str, SeededTenant]
) -> None:
    sign_in(browser, tenants["acme"].admin_key)
    csrf = csrf_of(browser.get(PATH))
    before = _stored(gateway, "globex")
    assert browser.get("/console/t/globex/settings").status_code == 404
    refused = browser.post("/console/t/globex/settings", data=FORM | {"csrf": csrf})
    assert refused.status_code == 404
    assert "Globex" not in refused.text
    assert _stored(gateway, "globex") == before
