"""Tool benchmark: a tool-heavy session through the real pipeline on a 32k window.

``hubbub gateway`` and one ``hubbub worker`` run on Postgres and Redis; the worker starts
a real MCP server over stdio (``tests/fixtures/mcp_server.py``, the SDK's server side)
from ``HUBBUB_MCP_SERVERS``. The fake provider plays a model that, for each task it is
given, asks for tools in two rounds (three calls, then two) before it answers: 60 tasks,
300 tool calls. Most outputs are a few thousand characters; every fifteenth is 200,000,
far beyond what the window holds, so the tool-output ladder (truncation, stored results
with a ``ref``, spilling) and the compressor work on real tool traffic.

Reported: the largest prompt sent against the window, prompt tokens per turn, the
compactions (trigger, compressor CPU), results stored instead of inlined, and Hubbub's
own overhead per turn: reply delivered - message stored - time in the model - time in
the tools (both recorded by the worker in the reply's outbox entry).

Usage: ``python -m bench.tools [--tasks N] [--big-every K]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import Engine, create_engine, text

import agent_core  # noqa: F401  (offline tokenizer environment)
from bench.machine import machine, speed_probe_ms
from bench.pipeline import (
    REDIS_URL,
    _answered_after,
    _env,
    _fresh_postgres,
    _max_message_id,
    _percentile,
    _wait_http,
    delivered,
)
from tests.fixtures.llm_server import (
    FakeLLM,
    LLMServerThread,
    ScriptedReply,
    is_summary_request,
    tool_call,
)
from tests.fixtures.services import ServiceProcess, free_port, wait_until

WINDOW = 32_768
SERVER = "bench"
BLOB = f"{SERVER}__blob"
BIG_OUTPUT = 200_000
ROUNDS = (3, 2)
"""Tool calls per round of one task."""
_TASK = re.compile(r"task (\d+)")
REPO = Path(__file__).resolve().parent.parent
WARM_UP_TASKS = 3


class ToolUser:
    """The fake model: two rounds of ``blob`` calls per task, then an answer."""

    def __init__(self, big_every: int) -> None:
        self.big_every = big_every
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        messages = body.get("messages", [])
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        match = (
            _TASK.search(str(messages[last_user].get("content") or "")) if last_user >= 0 else None
        )
        task = int(match.group(1)) if match else 0
        done = sum(1 for m in messages[last_user + 1 :] if m.get("tool_calls"))
        if done >= len(ROUNDS):
            return ScriptedReply(f"task {task} done after {done} tool rounds")
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or ()}
        calls = []
        for n in range(ROUNDS[done]):
            self.calls += 1
            size = BIG_OUTPUT if self.calls % self.big_every == 0 else 500 + self.calls * 37 % 5_500
            arguments = {"chars": size, "seed": self.calls}
            call_id = f"t{task}r{done}c{n}"
            if BLOB in offered:
                calls.append(tool_call(BLOB, arguments, call_id))
            else:  # the tool sits behind the bridge (deferral)
                calls.append(
                    tool_call("tool_call", {"name": BLOB, "arguments": arguments}, call_id)
                )
        return ScriptedReply(None, calls)


def _turns(db: Engine, since: int) -> list[dict[str, float]]:
    out = []
    for total, meta in delivered(db, since):
        llm, tools = float(meta.get("llm_ms", 0.0)), float(meta.get("tool_ms", 0.0))
        out.append(
            {
                "total_ms": total,
                "llm_ms": llm,
                "tool_ms": tools,
                "overhead_ms": total - llm - tools,
                "tool_calls": float(meta.get("tool_calls", 0)),
            }
        )
    return out


def _compactions(db: Engine) -> list[dict[str, Any]]:
    with db.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT trigger, strategy, tokens_before, tokens_after, cpu_ms, summary_calls "
                "FROM compactions ORDER BY id"
            )
        ).all()
    return [
        {
            "trigger": r[0],
            "strategy": r[1],
            "tokens_before": r[2],
            "tokens_after": r[3],
            "cpu_ms": r[4],
            "summary_calls": r[5],
        }
        for r in rows
    ]


def _scalar(db: Engine, sql: str) -> int:
    with db.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def run(fake: FakeLLM, tasks: int, big_every: int) -> dict[str, Any]:
    """Send ``tasks`` tasks one at a time to one web chat conversation and measure."""
    user = ToolUser(big_every)
    fake.policy = user
    db_url = _fresh_postgres()
    redis.Redis.from_url(REDIS_URL).flushdb()
    port = free_port()
    servers = {
        SERVER: {
            "command": sys.executable,
            "args": ["-m", "tests.fixtures.mcp_server", "stdio"],
            "env": {"PYTHONPATH": str(REPO)},
        }
    }
    with tempfile.TemporaryDirectory() as home:
        env = _env(
            Path(home),
            fake.base_url,
            HUBBUB_DATABASE_URL=db_url,
            HUBBUB_REDIS_URL=REDIS_URL,
            HUBBUB_PORT=str(port),
            HUBBUB_CONTEXT_LENGTH=str(WINDOW),
            HUBBUB_MCP_SERVERS=json.dumps(servers),
        )
        gateway = ServiceProcess(["gateway"], env, "")
        _wait_http(port)
        worker = ServiceProcess(["worker"], env | {"HUBBUB_LOG_LEVEL": "INFO"}, "worker ready")
        worker.wait_ready()
        db = create_engine(db_url, pool_size=1, max_overflow=0)
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        try:

            def task(conversation: str, number: int) -> None:
                last = _max_message_id(db)
                response = client.post(
                    f"/api/webchat/{conversation}/messages",
                    json={"text": f"task {number}: look at the job logs and tell me what failed"},
                )
                response.raise_for_status()
                wait_until(partial(_answered_after, db, last), timeout=300, interval=0.02)

            for number in range(WARM_UP_TASKS):  # imports, connections, the MCP server's start
                task("warm-up", number)
            fake.requests.clear()
            user.calls = 0
            since = _max_message_id(db)
            results_before = _scalar(db, "SELECT count(*) FROM tool_results")
            compactions_before = len(_compactions(db))
            for number in range(tasks):
                task("tools", number)
            turns = _turns(db, since)
            compactions = _compactions(db)[compactions_before:]
            stored_results = _scalar(db, "SELECT count(*) FROM tool_results") - results_before
            tool_messages = _scalar(
                db, f"SELECT count(*) FROM messages WHERE role = 'tool' AND id > {since}"
            )
        finally:
            client.close()
            db.dispose()
            worker.kill()
            gateway.kill()
    chat = [b for b in fake.chat_requests() if not is_summary_request(b)]
    prompts = [fake.counter.count_messages(b.get("messages", [])) for b in chat]
    per_turn: Counter[int] = Counter()
    for body, tokens in zip(chat, prompts, strict=True):
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        match = _TASK.search(str(users[-1].get("content") or "")) if users else None
        per_turn[int(match.group(1)) if match else -1] += tokens
    overheads = [t["overhead_ms"] for t in turns]
    return {
        "tasks": tasks,
        "turns_answered": len(turns),
        "tool_calls_asked": user.calls,
        "tool_calls_recorded": int(sum(t["tool_calls"] for t in turns)),
        "tool_messages_stored": tool_messages,
        "results_stored_with_a_ref": stored_results,
        "big_outputs_chars": BIG_OUTPUT,
        "big_outputs": user.calls // big_every,
        "model_requests": len(chat),
        "largest_prompt_tokens": max(prompts),
        "largest_prompt_share_of_window": round(max(prompts) / WINDOW, 3),
        "prompt_tokens_per_turn": {
            "median": round(statistics.median(per_turn.values())),
            "max": max(per_turn.values()),
        },
        "summary_requests": len(fake.chat_requests()) - len(chat),
        "compactions": {
            "count": len(compactions),
            "by_trigger": dict(Counter(c["trigger"] for c in compactions)),
            "cpu_ms_max": max((c["cpu_ms"] or 0 for c in compactions), default=None),
            "cpu_ms_median": round(statistics.median([c["cpu_ms"] or 0 for c in compactions]), 1)
            if compactions
            else None,
        },
        "overhead_ms_p50": round(statistics.median(overheads), 2),
        "overhead_ms_p99": round(_percentile(overheads, 0.99), 2),
        "tool_ms_p50": round(statistics.median(t["tool_ms"] for t in turns), 2),
        "llm_ms_p50": round(statistics.median(t["llm_ms"] for t in turns), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60, help="five tool calls each")
    parser.add_argument("--big-every", type=int, default=15, help="every Kth output is 200k")
    args = parser.parse_args()
    probe = speed_probe_ms()
    server = LLMServerThread(FakeLLM())
    fake = server.start()
    try:
        result = run(fake, args.tasks, args.big_every)
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "benchmark": "tools",
                "machine": machine(probe),
                "window": WINDOW,
                "deployment": "postgres+redis, gateway + 1 worker process, MCP over stdio",
                "fake_provider_latency_ms": 0,
                **result,
            },
            indent=2,
        )
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
