"""Tenants and database-configured bots: added with the CLI, started by the gateway."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_core.db.engine import transaction
from agent_core.db.models import Bot
from gateway.cli import app
from tests.fixtures.llm_server import FakeLLM
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
