"""MCP servers over stdio and streamable HTTP, through the pool the registry uses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.config import ToolSettings
from agent_core.tools.base import ToolContext, ToolOutput
from agent_core.tools.mcp.pool import McpPool
from agent_core.tools.mcp.spec import McpServerSpec
from agent_core.tools.registry import ToolRegistry
from tests.fixtures.services import REPO_ROOT, free_port, wait_until
from tests.integration.tools.helpers import call

pytestmark = pytest.mark.integration

SERVER = ("-m", "tests.fixtures.mcp_server")
ENV = (("PYTHONPATH", str(REPO_ROOT)),)
START_TIMEOUT = 120.0
"""Generous: importing the SDK takes seconds on a loaded two-core machine."""


@pytest.fixture
def pool() -> Iterator[McpPool]:
    mcp_pool = McpPool(call_timeout=30, start_timeout=START_TIMEOUT)
    yield mcp_pool
    mcp_pool.close()


def stdio(name: str = "files", **kwargs: object) -> McpServerSpec:
    fields: dict[str, object] = {
        "owner": "",
        "name": name,
        "command": sys.executable,
        "args": (*SERVER, "stdio"),
        "env": ENV,
    }
    fields.update(kwargs)
    return McpServerSpec(**fields)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def ctx() -> ToolContext:
    from sqlalchemy.orm import sessionmaker

    return ToolContext(
        factory=sessionmaker(), tenant_id="default", bot_id=1, session_id="s",
        conversation_key="k", platform="webchat", chat_id="c", chat_type="private",
        user_id="ann",
    )  # fmt: skip


def registry(pool: McpPool, *servers: McpServerSpec, context_length: int = 128_000) -> ToolRegistry:
    return ToolRegistry.for_turn(
        settings=ToolSettings(), allowed=None, mcp=pool, servers=list(servers),
        chat_type="private", context_length=context_length,
    )  # fmt: skip


def test_stdio_tools_are_offered_and_called(pool: McpPool) -> None:
    spec = stdio(env=(*ENV, ("SECRET_TOKEN", "s3cr3t")))
    reg = registry(pool, spec)
    assert {"files__echo", "files__add", "files__env", "files__hang"} <= set(reg.names())
    assert "memory" in reg.names()
    assert reg.execute(call("files__add", a=2, b=40), ctx()).content == "42"
    assert reg.execute(call("files__env", name="SECRET_TOKEN"), ctx()).content == "s3cr3t"
    bad = reg.execute(call("files__add", a="two", b=1), ctx())
    assert bad.is_error
    assert "is not of type 'integer'" in bad.content, "validated before it reaches the server"
    failed = reg.execute(call("files__fail"), ctx())
    assert failed.is_error
    first = reg.execute(call("files__pid"), ctx()).content
    again = registry(pool, spec).execute(call("files__pid"), ctx()).content
    assert first == again, "one process, reused across turns"


def test_a_tool_the_server_marks_read_only_is_repeatable_and_no_other(pool: McpPool) -> None:
    reg = registry(pool, stdio())
    assert reg.repeatable(call("files__echo", text="x"))
    assert not reg.repeatable(call("files__hold", marker="m", release="r"))
    assert not reg.repeatable(call("memory", action="add", content="x"))
    assert reg.repeatable(call("current_time"))


def test_deferred_mcp_tools_are_found_and_called_through_the_bridge(pool: McpPool) -> None:
    reg = registry(pool, stdio(), context_length=4_000)
    assert reg.deferred
    visible = [t["function"]["name"] for t in reg.openai_tools()]
    assert "files__echo" not in visible
    assert {"tool_search", "tool_describe", "tool_call"} <= set(visible)
    import json

    hits = json.loads(reg.execute(call("tool_search", query="add two integers"), ctx()).content)
    assert hits[0]["name"] == "files__add"
    out = reg.execute(call("tool_call", name="files__add", arguments={"a": 1, "b": 2}), ctx())
    assert (out.is_error, out.content) == (False, "3")


def test_a_connected_server_s_tools_are_listed_without_waiting_for_the_pool_s_loop(
    pool: McpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn lists the tools: a live server's known list costs no thread hop."""
    spec = stdio()
    listed = pool.list_tools([spec])[spec]
    assert listed

    def hop(coro: Coroutine[Any, Any, object], timeout: float) -> object:
        coro.close()
        raise AssertionError("the pool's loop was asked")

    monkeypatch.setattr(pool, "_run", hop)
    assert pool.list_tools([spec])[spec] == listed
    with pytest.raises(AssertionError, match="loop was asked"):
        pool.list_tools([spec, stdio("other")])  # a server not yet started is asked for


def test_a_killed_server_is_restarted_on_the_next_call(pool: McpPool) -> None:
    spec = stdio()
    first = int(pool.call_tool(spec, "pid", {}).content)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not alive(first), timeout=60, what="the server to die")
    second = pool.call_tool(spec, "pid", {})
    assert not second.is_error, second.content
    assert int(second.content) != first


def test_a_server_killed_mid_call_gives_a_tool_error_then_recovers(
    pool: McpPool, tmp_path: Path
) -> None:
    spec = stdio()
    pid = int(pool.call_tool(spec, "pid", {}).content)
    marker = tmp_path / "running"
    outcome: dict[str, ToolOutput] = {}
    worker = threading.Thread(
        target=lambda: outcome.update(out=pool.call_tool(spec, "hang", {"marker": str(marker)}))
    )
    worker.start()
    wait_until(marker.exists, timeout=60, what="the call to be running")
    os.kill(pid, signal.SIGKILL)
    worker.join(60)
    assert outcome["out"].is_error
    assert "went away during the call" in outcome["out"].content
    assert pool.call_tool(spec, "echo", {"text": "back"}).content == "back"


def test_a_hanging_tool_times_out_as_a_tool_error(pool: McpPool) -> None:
    spec = stdio(timeout=1.0)
    out = pool.call_tool(spec, "hang", {"seconds": 600})
    assert out.is_error
    assert "did not answer within 1 s" in out.content
    assert pool.call_tool(spec, "echo", {"text": "still here"}).content == "still here"


def test_a_server_that_cannot_start_is_a_tool_error_never_a_failed_turn(
    pool: McpPool, tmp_path: Path
) -> None:
    missing = McpServerSpec(owner="", name="ghost", command=str(tmp_path / "no-such-server"))
    reg = registry(pool, missing)
    assert "memory" in reg.names(), "the turn goes on without it"
    out = pool.call_tool(missing, "echo", {"text": "x"})
    assert out.is_error
    assert "ghost tool server is unavailable: its command was not found" in out.content

    exits = McpServerSpec(owner="", name="quits", command=sys.executable, args=("-c", "pass"))
    out = pool.call_tool(exits, "echo", {})
    assert out.is_error
    assert "quits tool server is unavailable" in out.content


def test_a_server_that_stops_starting_keeps_its_tools_listed_with_errors(
    pool: McpPool, tmp_path: Path
) -> None:
    launcher = tmp_path / "server"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.fixtures.mcp_server stdio\n")
    launcher.chmod(0o755)
    spec = McpServerSpec(owner="", name="flaky", command=str(launcher), env=ENV)
    assert "flaky__echo" in registry(pool, spec).names()
    pid = int(pool.call_tool(spec, "pid", {}).content)
    launcher.unlink()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), timeout=60, what="the server to die")
    reg = registry(pool, spec)
    assert "flaky__echo" in reg.names(), "last known tools stay listed"
    out = reg.execute(call("flaky__echo", text="x"), ctx())
    assert out.is_error
    assert "flaky tool server is unavailable" in out.content


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *SERVER, "http", "--port", str(port),
         "--require-header", "Authorization: Bearer tok-123"],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, timeout=START_TIMEOUT, what="the MCP HTTP server")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(30)


def test_streamable_http_with_headers(pool: McpPool, http_server: str) -> None:
    spec = McpServerSpec(
        owner="acme", name="remote", url=http_server,
        headers=(("Authorization", "Bearer tok-123"),),
    )  # fmt: skip
    reg = registry(pool, spec)
    assert "remote__echo" in reg.names()
    assert reg.execute(call("remote__echo", text="over http"), ctx()).content == "over http"

    unauthorised = McpServerSpec(owner="acme", name="nokey", url=http_server)
    assert registry(pool, unauthorised).names().count("nokey__echo") == 0
    out = pool.call_tool(unauthorised, "echo", {"text": "x"})
    assert out.is_error
    assert "tok-123" not in out.content
