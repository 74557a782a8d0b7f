"""A tenant's settings put over the admin API change what its bots do.

A bot without its own trigger mode takes the tenant's; the tenant's instructions reach the
system prompt the model receives; a bad setting is refused with 422 and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agent_core.admin import keys
from agent_core.config import McpServerConfig
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.migrations import upgrade_to_head
from agent_core.tenancy.service import add_bot, add_tenant
from agent_core.tools.mcp.tenants import add_server
from gateway.routes.admin import PREFIX
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.telegram import FakeTelegram, TelegramServerThread
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until
from workers.bots import BotDirectory

pytestmark = pytest.mark.integration

ACME_TOKEN = "434343:ACME-settings-token"
PAYLOAD = Path(__file__).resolve().parents[1] / "fixtures" / "payloads" / "telegram"
INSTRUCTIONS = "Always sign off as the Acme night desk."
MCP_SECRET = "ghp-never-shown"


@pytest.fixture
def acme_telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread(FakeTelegram(token=ACME_TOKEN)) as fake:
        yield fake


@pytest.fixture
def admin_key(db_url: str, tmp_path: Path, acme_telegram: FakeTelegram) -> str:
    """Tenant ``acme`` with a Telegram bot that sets no trigger mode, and an admin key."""
    upgrade_to_head(db_url)
    engine = create_db_engine(db_url)
    try:
        box = CredentialBox(load_or_create_key(None, tmp_path))
        with transaction(make_session_factory(engine)) as db:
            add_tenant(db, "acme", name="Acme", persona=None)
            add_bot(
                db,
                box,
                tenant_id="acme",
                platform="telegram",
                name="desk",
                secrets={"token": ACME_TOKEN},
                options={"api_base": acme_telegram.api_base},
            )
            config = McpServerConfig(
                url=f"https://mcp.example/{MCP_SECRET}", headers={"Authorization": MCP_SECRET}
            )
            add_server(db, box, tenant_id="acme", name="gh", config=config)
            return keys.create(db, tenant_id="acme", scope="admin").secret
    finally:
        engine.dispose()


@pytest.fixture
def client(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    admin_key: str,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[httpx.Client]:
    gateway = gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=gateway.base_url, timeout=60, headers=headers) as c:
        yield c


def test_a_tenant_s_trigger_mode_and_instructions_reach_its_bot(
    client: httpx.Client, fake_llm: FakeLLM, acme_telegram: FakeTelegram
) -> None:
    url = f"{PREFIX}/tenants/acme/settings"
    (bot,) = client.get(f"{PREFIX}/tenants/acme/bots").json()
    assert bot["trigger_mode"] is None, "the bot inherits its tenant's trigger mode"
    new = {
        "name": "Acme",
        "persona": None,
        "instructions": INSTRUCTIONS,
        "trigger_mode": "all",
        "allow_users": None,
        "allow_chats": None,
        "tools": ["memory", "session_*"],
        "busy_mode": "interrupt",
        "compression_threshold": None,
        "hygiene_threshold": None,
        "models": None,
        "default_model": None,
    }
    response = client.put(url, json=new)
    assert response.status_code == 200, response.text
    shown = client.get(url)
    assert shown.json() == new | {"mcp_servers": [{"name": "gh", "transport": "http"}]}
    assert MCP_SECRET not in shown.text
    read_only = new | {"mcp_servers": []}
    assert client.put(url, json=read_only).status_code == 422, "MCP servers are read-only here"
    (event,) = client.get(f"{PREFIX}/tenants/acme/audit").json()
    assert event["action"] == "settings.update"
    assert event["before"]["trigger_mode"] is None
    assert event["after"] == new

    # Unaddressed, in a group: only a bot in trigger mode "all" answers it.
    update = json.loads((PAYLOAD / "group_unaddressed.json").read_text(encoding="utf-8"))
    acme_telegram.push_update(update)
    chat_id = update["message"]["chat"]["id"]
    sent = wait_until(lambda: acme_telegram.sent_messages(chat_id), timeout=30, what="reply")
    assert sent[0]["text"].startswith("echo: ")
    (request,) = fake_llm.chat_requests()
    system = request["messages"][0]["content"]
    assert INSTRUCTIONS in system
    offered = {t["function"]["name"] for t in request.get("tools", [])}
    assert offered, "the tenant's tool allow-list keeps some tools"
    assert all(name == "memory" or name.startswith("session_") for name in offered), offered


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trigger_mode": "loud"}, "trigger mode 'loud' is unknown"),
        ({"busy_mode": "frantic"}, "busy mode 'frantic' is unknown"),
        ({"tools": ["memory", "gh tools"]}, "tool pattern 'gh tools' is invalid"),
        ({"instructions": "x" * 20_001}, "at most 20000 characters"),
    ],
)
def test_a_bad_tenant_setting_is_refused_and_changes_nothing(
    client: httpx.Client, change: dict[str, object], message: str
) -> None:
    url = f"{PREFIX}/tenants/acme/settings"
    before = client.get(url).json()
    response = client.put(url, json={"name": "Acme"} | change)
    assert response.status_code == 422, response.text
    assert message in response.text
    assert client.get(url).json() == before
    assert client.get(f"{PREFIX}/tenants/acme/audit").json() == []


def test_a_bot_s_own_values_win_over_its_tenant_s(db_url: str, tmp_path: Path) -> None:
    upgrade_to_head(db_url)
    engine = create_db_engine(db_url)
    try:
        factory = make_session_factory(engine)
        box = CredentialBox(load_or_create_key(None, tmp_path))
        with transaction(factory) as db:
            tenant = add_tenant(db, "acme", name="Acme", persona=None)
            tenant.settings = {"trigger_mode": "commands", "allow_chats": ["42"], "tools": ["x"]}
            for name, options in (("plain", {}), ("own", {"allow_chats": ["7"]})):
                add_bot(
                    db,
                    box,
                    tenant_id="acme",
                    platform="telegram",
                    name=name,
                    secrets={"token": ACME_TOKEN},
                    options=options,
                    trigger_mode="mention" if options else None,
                )
        settings = settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=None))
        bots = BotDirectory(settings, factory, box)
        plain, own = (
            bots.resolve("acme", "telegram", "plain"),
            bots.resolve("acme", "telegram", "own"),
        )
        assert plain is not None
        assert own is not None
        assert (plain.trigger_mode, own.trigger_mode) == ("commands", "mention")
        assert bots.config(plain.id).allow_chats == frozenset({"42"})
        assert bots.config(own.id).allow_chats == frozenset({"7"})
        assert bots.config(plain.id).trigger_mode == "commands"
    finally:
        engine.dispose()
