"""MCP tools end to end: ``config.yaml`` servers (stdio and streamable HTTP), HTTP in and out.

``hubbub up`` runs as a user runs it, embedded (SQLite, turns in-process) or with Postgres
and Redis (a worker child process); a real MCP server (the SDK's server side) answers over
stdio and over HTTP; the fake model calls ``<server>__<tool>`` and the reply people read
says what the tool returned. A server that dies gives the model a tool error, and the
turn still answers.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fixtures.llm_server import FakeLLM, ScriptedReply, tool_call
from tests.fixtures.services import (
    REPO_ROOT,
    ServiceProcess,
    free_port,
    hubbub_env,
    post_accepted,
    start_up,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.e2e

TOKEN = "Bearer tok-e2e"
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "stdio": ("files__echo", {"text": "written by the stdio server"}),
    "http": ("remote__add", {"a": 40, "b": 2}),
    "dead": ("remote__echo", {"text": "anyone there?"}),
}


def _model(body: dict[str, Any]) -> ScriptedReply:
    """Calls the tool the question names once, then answers with what the tool said."""
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    results = [m for m in messages[last_user:] if m.get("role") == "tool"]
    if results:
        return ScriptedReply("The tool said: " + " / ".join(str(m["content"]) for m in results))
    name, arguments = CALLS[str(messages[last_user]["content"])]
    return ScriptedReply(tool_calls=[tool_call(name, arguments)])


@pytest.fixture
def http_mcp() -> Iterator[subprocess.Popen[bytes]]:
    """The test MCP server over streamable HTTP, asking for a bearer token."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.mcp_server", "http", "--port", str(port),
         "--require-header", f"Authorization: {TOKEN}"],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    proc.port = port  # type: ignore[attr-defined]

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, timeout=120, what="the MCP HTTP server")
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


@pytest.fixture(params=["embedded", "workers"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path, fake_llm: FakeLLM) -> dict[str, str]:
    """``hubbub up`` alone on SQLite, or with Postgres and Redis (and so a worker process)."""
    if request.param == "embedded":
        env = hubbub_env(db_url="", home=tmp_path, fake=fake_llm)
        del env["HUBBUB_DATABASE_URL"]
        return env
    postgres_url = request.getfixturevalue("postgres_url")
    redis_url = request.getfixturevalue("redis_url")
    return hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)


def test_mcp_tools_over_stdio_and_http_reach_the_reply(
    deployment: dict[str, str],
    http_mcp: subprocess.Popen[bytes],
    fake_llm: FakeLLM,
    tmp_path: Path,
    processes: list[ServiceProcess],
) -> None:
    servers = {
        "files": {
            "command": sys.executable,
            "args": ["-m", "tests.fixtures.mcp_server", "stdio"],
            "env": {"PYTHONPATH": str(REPO_ROOT)},
        },
        "remote": {
            "url": f"http://127.0.0.1:{http_mcp.port}/mcp",  # type: ignore[attr-defined]
            "headers": {"Authorization": TOKEN},
            "timeout": 30,
        },
    }
    config = {"mcp_servers": servers, "mcp_start_timeout": 120}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    fake_llm.policy = _model
    port = free_port()
    processes.append(start_up(deployment, port))
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        post_accepted(client, "mcp", "stdio")
        (stdio_reply,) = wait_replies(client, "mcp", 1, timeout=180)
        post_accepted(client, "mcp", "http")
        http_reply = wait_replies(client, "mcp", 2, timeout=180)[-1]
        http_mcp.kill()
        http_mcp.wait(30)
        post_accepted(client, "mcp", "dead")
        dead_reply = wait_replies(client, "mcp", 3, timeout=180)[-1]

    assert stdio_reply["text"] == "The tool said: written by the stdio server"
    assert http_reply["text"] == "The tool said: 42"
    assert dead_reply["text"].startswith("The tool said: "), "a tool error, not a failed turn"
    assert "remote tool server is unavailable" in dead_reply["text"]
    offered = {t["function"]["name"] for t in fake_llm.chat_requests()[0]["tools"]}
    assert {"files__echo", "files__add", "remote__echo", "remote__add", "memory"} <= offered
    assert TOKEN not in dead_reply["text"]
