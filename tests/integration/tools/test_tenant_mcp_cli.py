"""``hubbub tenants mcp add|list|remove``: per-tenant servers with sealed secrets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.models import TenantMcpServer
from agent_core.tools.mcp.spec import config_specs, merge_servers
from agent_core.tools.mcp.tenants import tenant_specs
from gateway.cli import app
from tests.fixtures.services import hubbub_env

pytestmark = pytest.mark.integration

TOKEN = "ghp_SuperSecretToken123"
HEADER = "Bearer sk-http-secret-456"


@pytest.fixture
def cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    for key, value in hubbub_env(db_url=db_url, home=tmp_path, fake=None).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    return run


def test_add_list_remove_with_sealed_secrets(
    cli: Callable[..., str], db_url: str, tmp_path: Path
) -> None:
    cli("tenants", "add", "acme")
    out = cli(
        "tenants", "mcp", "add", "acme", "github", "--command", "npx",
        "--arg", "-y", "--arg", "@example/github-mcp", "--env", f"GITHUB_TOKEN={TOKEN}",
        "--timeout", "20",
    )  # fmt: skip
    assert "github__<tool>" in out
    cli(
        "tenants", "mcp", "add", "acme", "search", "--url", "https://mcp.example.com/mcp",
        "--header", f"Authorization: {HEADER}", "--no-groups",
    )  # fmt: skip
    listed = cli("tenants", "mcp", "list", "acme")
    assert "github  stdio  npx -y @example/github-mcp  timeout=20s  secrets: GITHUB_TOKEN" in listed
    assert (
        "search  http  https://mcp.example.com/mcp  private chats only  secrets: Authorization"
        in listed
    )
    assert TOKEN not in listed
    assert HEADER not in listed

    engine = create_db_engine(db_url)
    factory = make_session_factory(engine)
    with transaction(factory) as db:
        stored = " ".join(str(r.secrets) for r in db.scalars(select(TenantMcpServer)))
        assert TOKEN not in stored, "sealed at rest"
        assert "sk-http-secret" not in stored
        box = CredentialBox(load_or_create_key(None, tmp_path))
        specs = {s.name: s for s in tenant_specs(db, box, "acme")}
    engine.dispose()
    assert dict(specs["github"].env) == {"GITHUB_TOKEN": TOKEN}
    assert specs["github"].timeout == 20
    assert dict(specs["search"].headers) == {"Authorization": HEADER}
    assert specs["search"].groups is False
    assert TOKEN not in repr(specs["github"]), "specs never show secrets"
    assert specs["github"].owner == "acme"

    assert cli("tenants", "mcp", "remove", "acme", "github").strip() == "MCP server removed."
    assert "No such MCP server." in cli("tenants", "mcp", "remove", "acme", "github", code=1)
    assert "github" not in cli("tenants", "mcp", "list", "acme")


def test_bad_definitions_are_refused_and_change_nothing(cli: Callable[..., str]) -> None:
    cli("tenants", "add", "acme")
    assert "no tenant 'nobody'" in cli(
        "tenants", "mcp", "add", "nobody", "x", "--command", "x", code=2
    )
    assert "either `command` (stdio) or `url`" in cli("tenants", "mcp", "add", "acme", "x", code=2)
    assert "MCP server name 'a__b'" in cli(
        "tenants", "mcp", "add", "acme", "a__b", "--command", "x", code=2
    )
    assert "NAME=VALUE" in cli(
        "tenants", "mcp", "add", "acme", "x", "--command", "x", "--env", "oops", code=2
    )
    cli("tenants", "mcp", "add", "acme", "dup", "--url", "http://127.0.0.1:1/mcp")
    assert "already" in cli("tenants", "mcp", "add", "acme", "dup", "--url", "http://x", code=2)
    assert cli("tenants", "mcp", "list", "acme").count("dup") == 1


def test_a_tenants_server_replaces_a_configured_one_of_the_same_name() -> None:
    from agent_core.config import McpServerConfig
    from agent_core.tools.mcp.spec import McpServerSpec

    configured = config_specs(
        {"docs": McpServerConfig(command="a"), "web": McpServerConfig(url="http://w/mcp")}
    )
    mine = [McpServerSpec(owner="acme", name="docs", command="b")]
    merged = {s.name: s for s in merge_servers(configured, mine)}
    assert merged["docs"].command == "b"
    assert merged["docs"].owner == "acme"
    assert merged["web"].owner == ""


def test_a_database_bot_keeps_its_own_tool_list(cli: Callable[..., str], db_url: str) -> None:
    from agent_core.db.models import Bot
    from agent_core.tools.registry import bot_tool_patterns

    cli("bots", "add", "slack", "ops", "--token", "xoxb-1", "--tool", "memory", "--tool", "gh__*")
    cli("bots", "add", "slack", "all", "--token", "xoxb-2")
    engine = create_db_engine(db_url)
    with transaction(make_session_factory(engine)) as db:
        bots = {b.name: b for b in db.scalars(select(Bot))}
        assert bot_tool_patterns(bots["ops"].settings) == frozenset({"memory", "gh__*"})
        assert bot_tool_patterns(bots["all"].settings) is None
    engine.dispose()
