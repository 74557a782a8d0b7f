"""Settings changed through the admin API reach a running gateway's bots without a restart.

A Slack bot of tenant ``acme`` receives channel messages on its webhook; its tenant's
trigger mode and its own allowlist are changed over the admin API between two messages.
Another process's change (the CLI, another gateway) is seen once the cached entry is
``HUBBUB_SETTINGS_REFRESH_SECONDS`` old.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from agent_core.admin import keys
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.migrations import upgrade_to_head
from agent_core.db.models import Bot, Message, Tenant
from agent_core.tenancy.service import add_bot, add_tenant
from gateway.routes.admin import PREFIX
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    SlackServerThread,
    load_payload,
    sign,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until
from workers.bots import BotDirectory

pytestmark = pytest.mark.integration

CHANNEL = "C0GENERAL"
_ts = count(1)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with SlackServerThread() as fake:
        yield fake


@pytest.fixture
def admin_key(db_url: str, tmp_path: Path, slack: FakeSlack) -> str:
    """Tenant ``acme`` with a Slack bot ``ops`` that sets no trigger mode, and an admin key."""
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
                platform="slack",
                name="ops",
                secrets={"token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
                options={"api_base": slack.api_base},
            )
            return keys.create(db, tenant_id="acme", scope="admin").secret
    finally:
        engine.dispose()


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    admin_key: str,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    return gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )


@pytest.fixture
def client(gateway: GatewayServer, admin_key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=gateway.base_url, timeout=60, headers=headers) as c:
        yield c


def post_channel_message(client: httpx.Client, text: str) -> str:
    """An unaddressed channel message on the bot's webhook; returns its ``ts``."""
    n = next(_ts)
    event = load_payload("message_channel")
    ts = f"1732799{n:03d}.000100"
    event["event"] |= {"text": text, "ts": ts, "event_ts": ts, "client_msg_id": f"msg-{n}"}
    event["event"]["blocks"] = []
    event["event_id"] = f"Ev0REFRESH{n:03d}"
    body = json.dumps(event).encode()
    headers = sign(body) | {"Content-Type": "application/json"}
    response = httpx.post(
        f"{client.base_url}/webhooks/slack/acme.ops", content=body, headers=headers, timeout=30
    )
    assert response.status_code == 200, response.text
    return ts


def stored_texts(gateway: GatewayServer) -> list[str]:
    with transaction(gateway.runtime.factory) as db:
        found = select(Message.content).where(Message.role == "user").order_by(Message.id)
        return [str(text) for text in db.scalars(found)]


def put_tenant(client: httpx.Client, **changes: object) -> None:
    url = f"{PREFIX}/tenants/acme/settings"
    current = client.get(url).json()
    current.pop("mcp_servers")
    response = client.put(url, json=current | changes)
    assert response.status_code == 200, response.text


def test_trigger_mode_and_allowlist_changes_apply_to_the_next_message(
    gateway: GatewayServer, client: httpx.Client, slack: FakeSlack
) -> None:
    (bot,) = client.get(f"{PREFIX}/tenants/acme/bots").json()
    post_channel_message(client, "first, unaddressed")
    assert stored_texts(gateway) == ["first, unaddressed"]
    assert slack.posted(CHANNEL) == [], "mention mode: an unaddressed message is context"

    put_tenant(client, trigger_mode="all")
    post_channel_message(client, "second, unaddressed")
    wait_until(lambda: slack.posted(CHANNEL), timeout=60, what="the reply in mode all")
    assert slack.posted(CHANNEL)[0]["text"].startswith("echo: ")

    url = f"{PREFIX}/tenants/acme/bots/{bot['id']}"
    response = client.put(url, json={"allow_users": ["U0SOMEONE"]})
    assert response.status_code == 200, response.text
    post_channel_message(client, "third, from outside the allowlist")
    assert len(stored_texts(gateway)) == 2, "ignored: nothing stored"

    response = client.put(url, json={"allow_users": ["U0CAROL"]})
    assert response.status_code == 200, response.text
    post_channel_message(client, "fourth, allowed again")
    wait_until(lambda: len(slack.posted(CHANNEL)) == 2, timeout=60, what="the second reply")
    assert stored_texts(gateway)[-1] == "fourth, allowed again"


def test_a_change_made_elsewhere_is_seen_once_the_entry_is_old(
    db_url: str, tmp_path: Path, admin_key: str
) -> None:
    engine = create_db_engine(db_url)
    try:
        factory = make_session_factory(engine)
        settings = settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=None))
        now = [0.0]
        bots = BotDirectory(
            settings,
            factory,
            CredentialBox(load_or_create_key(None, tmp_path)),
            refresh_seconds=5,
            clock=lambda: now[0],
        )
        record = bots.resolve("acme", "slack", "ops")
        assert record is not None
        assert record.trigger_mode == "mention"
        assert bots.config(record.id).allow_chats == frozenset()
        with transaction(factory) as db:
            tenant = db.get(Tenant, "acme")
            assert tenant is not None
            tenant.settings = {"trigger_mode": "all", "allow_chats": [CHANNEL]}
            bot = db.get(Bot, record.id)
            assert bot is not None
            bot.answer_bots = True
        now[0] = 4.9
        stale = bots.resolve("acme", "slack", "ops")
        assert stale == record, "within the refresh time the cached entry is used"
        now[0] = 5.0
        fresh = bots.resolve("acme", "slack", "ops")
        assert fresh is not None
        assert (fresh.trigger_mode, fresh.answer_bots) == ("all", True)
        assert bots.config(record.id).allow_chats == frozenset({CHANNEL})
    finally:
        engine.dispose()


def test_allowlists_a_bot_started_with_are_not_kept_by_its_receiver(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    admin_key: str,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    """The Slack receiver's own pre-check follows the changes too, not only intake's."""
    engine = create_db_engine(db_url)
    try:
        with transaction(make_session_factory(engine)) as db:
            tenant = db.get(Tenant, "acme")
            assert tenant is not None
            tenant.settings = {"allow_users": ["U0SOMEONE"]}
    finally:
        engine.dispose()
    gateway = gateway_factory(
        settings_from_env(
            hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm, settings_refresh_seconds=1)
        )
    )
    with httpx.Client(
        base_url=gateway.base_url, timeout=60, headers={"Authorization": f"Bearer {admin_key}"}
    ) as client:
        post_channel_message(client, "from Carol, outside the tenant's allowlist")
        assert stored_texts(gateway) == []

        # Changed by another process: seen once the cached entry is a second old.
        with transaction(gateway.runtime.factory) as db:
            tenant = db.get(Tenant, "acme")
            assert tenant is not None
            tenant.settings = {"allow_users": ["U0CAROL"]}

        def allowed() -> bool:
            post_channel_message(client, "from Carol, allowed now")
            return bool(stored_texts(gateway))

        wait_until(allowed, interval=0.25, what="the tenant's new allowlist at the receiver")

        # The bot's own allowlist, through this gateway's admin API: at once.
        (bot,) = client.get(f"{PREFIX}/tenants/acme/bots").json()
        response = client.put(
            f"{PREFIX}/tenants/acme/bots/{bot['id']}", json={"allow_users": ["U0SOMEONE"]}
        )
        assert response.status_code == 200, response.text
        count_before = len(stored_texts(gateway))
        post_channel_message(client, "from Carol, outside the bot's allowlist")
        assert len(stored_texts(gateway)) == count_before
        response = client.put(
            f"{PREFIX}/tenants/acme/bots/{bot['id']}", json={"allow_users": ["U0CAROL"]}
        )
        assert response.status_code == 200, response.text
        post_channel_message(client, "from Carol, in the bot's allowlist")
        assert stored_texts(gateway)[-1] == "from Carol, in the bot's allowlist"
