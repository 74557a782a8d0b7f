"""The console in headless Chromium: sign in, walk every page, restore a compaction, edit
the settings (a refusal first), sign out.

The compaction is a real one: a web chat conversation with the fake model, then
``/compress``. Another tenant gets bots on every platform with stored traffic in each
delivery state. Screenshots of every page (desktop and 390 px wide) are kept under
``test-artifacts/console/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect
from sqlalchemy import select

from agent_core.admin import keys
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Compaction
from agent_core.usage.repository import UsageRepository
from tests.fixtures.console import seed_tenant
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    REPO_ROOT,
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.e2e

expect.set_options(timeout=60_000)

ARTIFACTS = REPO_ROOT / "test-artifacts" / "console"
PHONE = ViewportSize(width=390, height=844)
DESKTOP = ViewportSize(width=1200, height=600)
WINDOW, OUTPUT = 8192, 1024
LINE = "The deploy of build {i} to staging finished; Alice checked /var/log/app{i}.log. "


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _fits(page: Page) -> None:
    """The page body never scrolls sideways (wide tables scroll inside their own box)."""
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{page.url} is {overflow}px wider than the viewport"


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(
        db_url=sqlite_url,
        home=tmp_path,
        fake=fake_llm,
        context_length=WINDOW,
        max_output_tokens=OUTPUT,
    )
    return gateway_factory(settings_from_env(env))


@pytest.fixture
def compacted(gateway: GatewayServer) -> str:
    """A web chat session of the default tenant, compacted by ``/compress``: its id."""
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client:
        for i in range(8):
            post_accepted(client, "standup", (LINE.format(i=i) * 6).strip())
            wait_replies(client, "standup", i + 1)
        post_accepted(client, "standup", "/compress deploys")
        assert wait_replies(client, "standup", 9)[-1]["text"].startswith("Compressed ")
    with read_transaction(gateway.runtime.factory) as db:
        (compaction,) = db.scalars(select(Compaction).where(Compaction.trigger == "manual"))
        return compaction.session_id


@pytest.fixture
def operator_key(gateway: GatewayServer) -> str:
    with transaction(gateway.runtime.factory) as db:
        seed_tenant(db, "acme")
        budgets = UsageRepository.from_session(db)
        budgets.set_budget(DEFAULT_TENANT_ID, "tenant", "month", "tokens", 1_000_000)
        budgets.set_budget(DEFAULT_TENANT_ID, "user", "day", "usd", 0.5)
        return keys.create(db, tenant_id=None, scope="admin").secret


def _sign_in(page: Page, base_url: str, key: str) -> None:
    page.goto(f"{base_url}/console")
    expect(page.locator("h1")).to_have_text("Sign in")
    page.fill("#key", key)
    page.click("#sign-in")


def test_walk_every_page_restore_and_sign_out(
    page: Page, gateway: GatewayServer, compacted: str, operator_key: str
) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto(f"{gateway.base_url}/console")
    _shot(page, "sign-in")
    _sign_in(page, gateway.base_url, operator_key)

    expect(page.locator("h1")).to_have_text("Tenants")
    expect(page.locator("#tenants")).to_contain_text("Acme Inc")
    expect(page.locator("#who")).to_contain_text("operator")
    _shot(page, "tenants")

    page.click("text=acme")
    bots = page.locator("#bots tr.bot")
    expect(bots).to_have_count(3)
    expect(bots.filter(has_text="telegram-support")).to_contain_text("ok")
    expect(bots.filter(has_text="slack-support")).to_contain_text("failing")
    expect(bots.filter(has_text="slack-support")).to_contain_text("channel_not_found")
    expect(bots.filter(has_text="discord-support")).to_contain_text("retrying")
    _shot(page, "bots")

    page.goto(f"{gateway.base_url}/console/t/{DEFAULT_TENANT_ID}/sessions")
    session = page.locator(".session", has_text="standup")
    expect(session.locator("figcaption")).to_contain_text(f"/ {WINDOW:,} tokens")
    expect(session.locator("figcaption")).to_contain_text("compressor at")
    _shot(page, "sessions")

    session.locator("a").click()
    timeline = page.locator("#timeline .compaction")
    expect(timeline).to_have_count(1)
    expect(timeline).to_contain_text("manual")
    expect(timeline).to_contain_text("→")
    page.locator("#timeline summary", has_text="Summary").first.click()
    expect(page.locator("#timeline pre.summary").first).to_be_visible()
    _shot(page, "session")

    page.click("#restore")
    expect(page.locator("#notice")).to_contain_text("The newest compaction was undone")
    expect(page.locator("#timeline .compaction")).to_contain_text("restored")
    expect(page.locator("#restore")).to_have_count(0)
    with read_transaction(gateway.runtime.factory) as db:
        (compaction,) = db.scalars(select(Compaction).where(Compaction.session_id == compacted))
        assert compaction.restored

    # The web chat turns and the summary above were metered by the real pipeline.
    page.click("nav.main >> text=Usage")
    expect(page.locator("#per-day rect.bar").first).to_be_attached()
    expect(page.locator("#per-model rect.bar")).to_have_count(1)
    expect(page.locator("#models")).to_contain_text("openai/fake-model")
    expect(page.locator("#per-day figcaption")).to_contain_text("tokens")
    _shot(page, "usage")
    page.select_option("select[name=measure]", "usd")
    page.click("text=Show")
    expect(page.locator("#per-day figcaption")).to_contain_text("$")

    page.click("nav.main >> text=Budgets")
    rows = page.locator("#budgets tr.budget")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="the whole tenant")).to_contain_text("1,000,000 tokens")
    expect(rows.filter(has_text="the whole tenant").locator("figure.gauge")).to_have_count(1)
    expect(rows.filter(has_text="each person")).to_contain_text("$0.5000")
    _shot(page, "budgets")

    page.click("nav.main >> text=Settings")
    expect(page.locator("h1")).to_have_text("Settings of Default tenant")
    page.fill("#persona", "You are the team's release assistant.")
    page.select_option("#trigger_mode", "all")
    page.fill("#allow_users", "ann\nbo")
    page.fill("#compression_threshold", "0.9")
    page.click("#save-settings")
    expect(page.locator("#error")).to_contain_text("the safety net must not start")
    expect(page.locator("#persona")).to_have_value("You are the team's release assistant.")
    page.fill("#compression_threshold", "0.45")
    page.click("#save-settings")
    expect(page.locator("#notice")).to_contain_text("The settings are saved")
    expect(page.locator("#allow_users")).to_have_value("ann\nbo")
    expect(page.locator("#trigger_mode")).to_have_value("all")
    _shot(page, "settings")

    page.click("nav.main >> text=Keys")
    page.select_option("#scope", "read")
    page.click("#create-key")
    expect(page.locator("#new-key")).to_have_text(re.compile(r"^hbk_[A-Za-z0-9_-]{43}$"))
    _shot(page, "keys")

    page.click("nav.main >> text=Audit")
    events = page.locator("#audit .event")
    expect(events.first).to_contain_text("key.create")
    expect(page.locator("#audit")).to_contain_text("session.restore")
    expect(page.locator("#audit")).to_contain_text("settings.update")
    expect(page.locator("#audit")).to_contain_text(operator_key[:12])
    _shot(page, "audit")

    page.click("#sign-out")
    expect(page.locator("h1")).to_have_text("Sign in")
    page.goto(f"{gateway.base_url}/console/t/{DEFAULT_TENANT_ID}/audit")
    expect(page.locator("h1")).to_have_text("Sign in")


def test_every_page_fits_a_390px_phone(
    browser: Browser, gateway: GatewayServer, compacted: str, operator_key: str
) -> None:
    context = browser.new_context(viewport=PHONE, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{gateway.base_url}/console/sign-in")
        _fits(page)
        _sign_in(page, gateway.base_url, operator_key)
        expect(page.locator("h1")).to_have_text("Tenants")
        paths = {
            "tenants": "/console/tenants",
            "bots": "/console/t/acme/bots",
            "sessions": f"/console/t/{DEFAULT_TENANT_ID}/sessions",
            "session": f"/console/t/{DEFAULT_TENANT_ID}/sessions/{compacted}",
            "usage": f"/console/t/{DEFAULT_TENANT_ID}/usage",
            "budgets": f"/console/t/{DEFAULT_TENANT_ID}/budgets",
            "settings": "/console/t/acme/settings",
            "keys": "/console/t/acme/keys",
            "audit": "/console/t/acme/audit",
        }
        for name, path in paths.items():
            page.goto(gateway.base_url + path)
            expect(page.locator("#sign-out")).to_be_visible()
            _fits(page)
            _shot(page, f"{name}-390")
    finally:
        context.close()
