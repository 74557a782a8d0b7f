"""Tool settings: ``mcp_servers:`` in config.yaml, ``HUBBUB_TOOLS``, secrets kept out of errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_core.config import load_settings
from agent_core.tools.mcp.spec import config_specs

CONFIG = """
mcp_servers:
  files:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
    env: {FS_TOKEN: "fs-secret"}
  search:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer http-secret"}
    timeout: 15
    groups: false
"""


def test_servers_come_from_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    monkeypatch.setenv("HUBBUB_CONFIG", str(path))
    monkeypatch.setenv("HUBBUB_TOOLS", "memory, current_time, files__*")
    settings = load_settings()
    specs = {s.name: s for s in config_specs(settings.mcp_servers)}
    assert specs["files"].transport == "stdio"
    assert specs["files"].args[-1] == "/srv/docs"
    assert dict(specs["files"].env) == {"FS_TOKEN": "fs-secret"}
    assert specs["search"].transport == "http"
    assert specs["search"].timeout == 15
    assert specs["search"].groups is False
    assert "http-secret" not in repr(settings)
    assert settings.tool_settings.enabled == frozenset({"memory", "current_time", "files__*"})


def test_unset_tools_means_everything() -> None:
    assert load_settings().tool_settings.enabled is None


def test_a_bad_server_is_refused_without_echoing_its_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "HUBBUB_MCP_SERVERS", '{"x": {"command": "a", "url": "b", "env": {"T": "leak-me"}}}'
    )
    with pytest.raises(ValidationError) as caught:
        load_settings()
    assert "either `command` (stdio) or `url`" in str(caught.value)
    assert "leak-me" not in str(caught.value)
