"""The ``hubbub`` command's small reports: ``--version`` and ``tenants list``."""

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
