"""The ``hubbub`` command's small reports and edits: ``--version``, ``tenants list``, busy modes."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gateway.cli import app
from tests.fixtures.services import hubbub_env

pytestmark = pytest.mark.integration


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"hubbub {version('hubbub')}\n"


def test_tenants_list_shows_name_bot_count_and_creation(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    for key, value in hubbub_env(db_url=sqlite_url, home=tmp_path, fake=None).items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()
    assert runner.invoke(app, ["tenants", "add", "acme", "--name", "Acme Ltd"]).exit_code == 0
    for name in ("one", "two"):
        added = runner.invoke(
            app, ["bots", "add", "telegram", name, "--tenant", "acme", "--token", "1:abc"]
        )
        assert added.exit_code == 0, added.output

    result = runner.invoke(app, ["tenants", "list"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("default  'Default tenant'  0 bots  created 20")
    assert lines[1].startswith("acme  'Acme Ltd'  2 bots  created 20")
    assert lines[1].endswith(" UTC")
    assert "1:abc" not in result.output


def test_a_bot_s_busy_mode_is_set_shown_cleared_and_checked(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    for key, value in hubbub_env(db_url=sqlite_url, home=tmp_path, fake=None).items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()
    add = ["bots", "add", "telegram", "ops", "--token", "1:abc", "--busy-mode", "interrupt"]
    assert runner.invoke(app, add).exit_code == 0

    assert "busy=interrupt" in runner.invoke(app, ["bots", "list"]).output
    changed = runner.invoke(app, ["bots", "busy-mode", "telegram", "ops", "queue"])
    assert changed.exit_code == 0, changed.output
    assert changed.output.endswith("busy mode: queue.\n")
    refused = runner.invoke(app, ["bots", "busy-mode", "telegram", "ops", "frantic"])
    assert refused.exit_code == 2
    assert "busy mode 'frantic' is unknown" in refused.output
    assert "busy=queue" in runner.invoke(app, ["bots", "list"]).output, "the refusal changed it"
    cleared = runner.invoke(app, ["bots", "busy-mode", "telegram", "ops", "inherit"])
    assert cleared.exit_code == 0, cleared.output
    assert "busy=tenant default" in runner.invoke(app, ["bots", "list"]).output
    missing = runner.invoke(app, ["bots", "busy-mode", "telegram", "nobody", "queue"])
    assert missing.exit_code == 1


def test_a_tenant_s_models_are_set_shown_refused_and_cleared(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=None)
    env |= {"HUBBUB_MODEL": "openai/main", "HUBBUB_FALLBACK_MODELS": "openai/small"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()
    assert runner.invoke(app, ["tenants", "add", "acme"]).exit_code == 0

    shown = runner.invoke(app, ["tenants", "models", "acme"])
    assert shown.exit_code == 0, shown.output
    assert shown.output == (
        "Models: all (openai/main, openai/small)\nDefault: HUBBUB_MODEL (openai/main)\n"
    )
    chosen = ["--model", "openai/small", "--default", "openai/small"]
    changed = runner.invoke(app, ["tenants", "models", "acme", *chosen])
    assert changed.exit_code == 0, changed.output
    assert changed.output == "Models: openai/small\nDefault: openai/small\n"
    refused = runner.invoke(app, ["tenants", "models", "acme", "--model", "openai/gpt-9"])
    assert refused.exit_code == 2
    assert "model 'openai/gpt-9' is not offered by this deployment" in refused.output
    again = runner.invoke(app, ["tenants", "models", "acme"])
    assert again.output == changed.output, "the refusal changed nothing"
    cleared = runner.invoke(app, ["tenants", "models", "acme", "--clear"])
    assert cleared.output == shown.output
    assert runner.invoke(app, ["tenants", "models", "nobody"]).exit_code == 1
