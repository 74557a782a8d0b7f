"""A worker killed in the middle of a tool round: the turn resumes it, nothing runs twice.

Real ``hubbub worker`` processes on Redis and Postgres, the fake provider over HTTP, and
a real MCP server (stdio) whose ``hold`` tool keeps the round open until the test lets go.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import select

from agent_core.db.engine import transaction
from agent_core.db.models import MemoryEntry, Message
from agent_core.tools import journal
from tests.fixtures.llm_server import FakeLLM, ScriptedReply, tool_call
from tests.fixtures.services import (
    REPO_ROOT,
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    post_accepted,
    settings_from_env,
    start_worker,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration

FACT = "The build host is zeta-7"


def _round_policy(marker: Path, release: Path) -> Callable[[dict[str, Any]], ScriptedReply]:
    """A model that asks for ``memory`` and ``ctl__hold`` at once, then reports the results."""

    def decide(body: dict[str, Any]) -> ScriptedReply:
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            return ScriptedReply(
                tool_calls=[
                    tool_call("memory", {"action": "add", "content": FACT, "scope": "chat"}, "m1"),
                    tool_call("ctl__hold", {"marker": str(marker), "release": str(release)}, "h1"),
                ]
            )
        return ScriptedReply(" | ".join(f"{m['tool_call_id']}: {m['content']}" for m in results))

    return decide


def _trigger(gateway: GatewayServer) -> Message | None:
    with transaction(gateway.runtime.factory) as db:
        return db.scalars(select(Message).where(Message.role == "user")).first()


def test_a_worker_killed_between_two_tool_calls_resumes_the_round(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fixtures.mcp_server", "stdio"],
        "env": {"PYTHONPATH": str(REPO_ROOT)},
    }
    # The workers read it from $HUBBUB_HOME/config.yaml, as an operator configures it.
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"ctl": server}}))
    env = hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url,
        mcp_start_timeout=120,
    )  # fmt: skip
    gateway = gateway_factory(settings_from_env(env))
    marker, release = tmp_path / "hold-runs", tmp_path / "release"
    fake_llm.policy = _round_policy(marker, release)
    first = start_worker(env)
    processes.append(first)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "crash", "remember the build host, then hold on")
        wait_until(marker.exists, timeout=240, what="the second tool to be running")
        # The database signal: the first call's result is stored before the second runs.
        stored = wait_until(
            lambda: (t := _trigger(gateway)) and (r := journal.pending(t)) and r.results,
            timeout=60,
            what="the memory result in the round's journal",
        )
        assert stored[0].content.startswith("Remembered.")
        first.kill()
        release.touch()
        processes.append(start_worker(env))
        (reply,) = wait_replies(client, "crash", 1, timeout=120)

    assert reply["text"].startswith("m1: Remembered."), reply["text"]
    assert reply["text"].endswith("h1: released"), reply["text"]
    chats = fake_llm.chat_requests()
    assert len(chats) == 2, "the resumed turn did not ask the model for the round again"
    assert [m.get("tool_call_id") for m in chats[1]["messages"][-2:]] == ["m1", "h1"]
    # The call that was running at the kill is the only one that ran again.
    assert marker.read_text().splitlines() == ["running", "running"]
    with transaction(gateway.runtime.factory) as db:
        facts = db.scalars(select(MemoryEntry.content)).all()
        rows = db.scalars(select(Message).order_by(Message.anchor_seq, Message.seq)).all()
        assert facts == [FACT]
        shape = [(m.role, m.tool_call_id, [c["id"] for c in m.tool_calls or ()]) for m in rows]
        assert shape == [
            ("user", None, []),
            ("assistant", None, ["m1", "h1"]),
            ("tool", "m1", []),
            ("tool", "h1", []),
            ("assistant", None, []),
        ]
        trigger = rows[0]
        assert journal.META_KEY not in trigger.meta, "the journal is gone once stored"
