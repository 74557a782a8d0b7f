"""Tenants and database-configured bots: added with the CLI, started by the gateway."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Bot, Message
from gateway.cli import app
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    SlackServerThread,
    load_payload,
    sign,
)
from tests.fixtures.platform_servers.telegram import FakeTelegram, TelegramServerThread
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

ACME_TOKEN = "424242:ACME-bot-token"
PAYLOAD = Path(__file__).resolve().parents[1] / "fixtures" / "payloads" / "telegram"


@pytest.fixture
def acme_telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread(FakeTelegram(token=ACME_TOKEN)) as fake:
        yield fake


@pytest.fixture
def cli(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., str]:
    env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # The CLI sets up logging on a stream CliRunner closes after each call.
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    return run


def test_a_tenant_bot_answers_with_its_own_token_and_persona(
    cli: Callable[..., str],
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    acme_telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    cli("tenants", "add", "acme", "--persona", "You are Acme's support assistant.")
    out = cli(
        "bots", "add", "telegram", "support", "--tenant", "acme",
        "--token", ACME_TOKEN, "--api-base", acme_telegram.api_base,
    )  # fmt: skip
    assert "/webhooks/telegram/acme.support" in out
    listed = cli("bots", "list")
    assert "acme/telegram/support" in listed
    assert ACME_TOKEN not in listed

    gateway = gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )
    with transaction(gateway.runtime.factory) as db:
        bot = db.query(Bot).filter_by(tenant_id="acme", name="support").one()
        assert bot.credentials is not None
        assert ACME_TOKEN not in bot.credentials, "credentials are encrypted at rest"

    update = json.loads((PAYLOAD / "private_text.json").read_text(encoding="utf-8"))
    acme_telegram.push_update(update)
    chat_id = update["message"]["chat"]["id"]
    sent = wait_until(lambda: acme_telegram.sent_messages(chat_id), timeout=30, what="reply")
    assert sent[0]["text"].startswith("echo: ")
    (request,) = fake_llm.chat_requests()
    assert request["messages"][0]["content"].startswith("You are Acme's support assistant.")


def test_bad_bot_definitions_are_refused_and_change_nothing(cli: Callable[..., str]) -> None:
    assert "no tenant 'nobody'" in cli(
        "bots", "add", "telegram", "x", "--tenant", "nobody", "--token", "t", code=2
    )
    assert "platform must be one of" in cli("bots", "add", "irc", "x", "--token", "t", code=2)
    cli("bots", "add", "slack", "ops", "--token", "xoxb-1", "--signing-secret", "s")
    assert "already" in cli("bots", "add", "slack", "ops", "--token", "xoxb-2", code=2)
    assert cli("bots", "remove", "slack", "ops").strip() == "Bot removed."
    assert "No such bot." in cli("bots", "remove", "slack", "ops", code=1)


@pytest.mark.parametrize(
    "name",
    ["acme.support", "a/b", "-lead", "_lead", "ünï", "x" * 65, "", "sp ace", "tab\t"],
)
def test_names_that_could_share_a_webhook_path_are_refused(
    cli: Callable[..., str], name: str
) -> None:
    assert "is not valid: use 1-64 ASCII letters" in cli("tenants", "add", "--", name, code=2)
    assert "is not valid: use 1-64 ASCII letters" in cli(
        "bots", "add", "--token", "xoxb-1", "--signing-secret", "s", "--", "slack", name, code=2
    )
    assert "tenant" not in cli("bots", "list")


def test_names_at_the_rule_s_edges_are_accepted(cli: Callable[..., str]) -> None:
    cli("tenants", "add", "Acme_2-x")
    out = cli("bots", "add", "slack", "o" * 64, "--tenant", "Acme_2-x", "--token", "t")
    assert f"/webhooks/slack/Acme_2-x.{'o' * 64}" in out


def test_a_stored_bot_whose_name_breaks_the_rule_cannot_take_over_a_tenant_path(
    cli: Callable[..., str],
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with SlackServerThread() as slack:
        cli("tenants", "add", "acme")
        cli(
            "bots", "add", "slack", "support", "--tenant", "acme", "--token", BOT_TOKEN,
            "--signing-secret", SIGNING_SECRET, "--api-base", slack.api_base,
        )  # fmt: skip
        settings = settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
        # Stored before the rule existed: the default tenant's bot "acme.support".
        box = CredentialBox(load_or_create_key(None, tmp_path))
        engine = create_db_engine(settings.resolved_database_url)
        with transaction(make_session_factory(engine)) as db:
            db.add(
                Bot(
                    tenant_id=DEFAULT_TENANT_ID,
                    platform="slack",
                    name="acme.support",
                    credentials=box.seal({"token": BOT_TOKEN, "signing_secret": "squatter"}),
                    settings={"api_base": slack.api_base},
                )
            )
        engine.dispose()
        with caplog.at_level(logging.ERROR, logger="gateway.supervisor"):
            gateway = gateway_factory(settings)
        event = load_payload("message_im")
        body = json.dumps(event).encode()
        headers = sign(body) | {"Content-Type": "application/json"}
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            response = client.post("/webhooks/slack/acme.support", content=body, headers=headers)
        assert response.status_code == 200, "acme's genuine event reaches acme's bot"
        assert "bot not started: its tenant id or name breaks the name rule" in caplog.text
        with transaction(gateway.runtime.factory) as db:
            (message,) = db.query(Message).filter_by(role="user").all()
            stored_bot = db.get(Bot, message.bot_id)
            assert stored_bot is not None
            assert (stored_bot.tenant_id, stored_bot.name) == ("acme", "support")
