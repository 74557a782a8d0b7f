"""Pipeline benchmark: turns per second and Hubbub's own per-turn overhead.

The fake provider answers at once, so everything measured is Hubbub: HTTP intake, the
database, the queue, the worker, the model client, delivery. Two deployments:

* ``redis``: ``hubbub gateway`` + one ``hubbub worker`` process on Postgres and Redis;
* ``embedded``: ``hubbub up`` alone on its SQLite file.

Per-turn overhead is read from the database: (reply delivered - message stored) minus the
time the worker spent inside the model call, for turns sent one at a time (no queueing).
Throughput sends a burst over many conversations and counts delivered replies.
Next to those wall-clock figures it reports the CPU time Hubbub's processes spent per
sequential turn (``/proc``), which does not depend on what else runs on the machine.

Usage: ``python -m bench.pipeline [--mode redis|embedded|both] [--turns N]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

import agent_core  # noqa: F401  (offline tokenizer environment)
from agent_core.db.migrations import upgrade_to_head
from bench.machine import machine, speed_probe_ms
from tests.fixtures.llm_server import LLMServerThread
from tests.fixtures.services import ServiceProcess, free_port, wait_until

POSTGRES_ADMIN_URL = os.environ.get(
    "HUBBUB_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("HUBBUB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
BENCH_DB = "hubbub_bench"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _fresh_postgres() -> str:
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {BENCH_DB}"))
    admin.dispose()
    url = make_url(POSTGRES_ADMIN_URL).set(database=BENCH_DB).render_as_string(False)
    upgrade_to_head(url)
    return url


def _env(home: Path, llm_url: str, **extra: str) -> dict[str, str]:
    return {
        "HUBBUB_HOME": str(home),
        "HUBBUB_MODEL": "openai/fake-model",
        "HUBBUB_LLM_API_BASE": llm_url,
        "HUBBUB_LLM_API_KEY": "sk-bench",
        "HUBBUB_CONTEXT_LENGTH": "128000",
        "HUBBUB_WORKER_METRICS_PORT": "0",
        "HUBBUB_LOG_LEVEL": "WARNING",
        # The benchmark sends turns as fast as they are answered; it measures Hubbub, not
        # its flood protection.
        "HUBBUB_RATE_LIMIT_USER": "off",
        "HUBBUB_RATE_LIMIT_CHAT": "off",
        # One turn per message, started at once: the collect window (the default busy
        # mode) would add itself to every measured turn.
        "HUBBUB_BUSY_MODE": "queue",
        **extra,
    }


def _wait_http(port: int) -> None:
    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=120, interval=0.2, what="gateway /healthz")


def delivered(db: Engine, since_id: int) -> list[tuple[float, dict[str, Any]]]:
    """Per sent reply to a message newer than ``since_id``: stored -> sent in ms, and its meta."""
    with db.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT m.created_at, o.sent_at, o.meta FROM outbox o "
                "JOIN messages m ON m.id = o.trigger_message_id "
                "WHERE o.state = 'sent' AND m.id > :since ORDER BY m.id"
            ),
            {"since": since_id},
        ).all()
    out = []
    for created, sent, meta in rows:
        meta = json.loads(meta) if isinstance(meta, str) else meta
        if isinstance(created, str):  # SQLite returns text
            created, sent = datetime.fromisoformat(created), datetime.fromisoformat(sent)
        out.append(((sent - created).total_seconds() * 1000, meta))
    return out


def _overheads(db: Engine, since_id: int) -> list[float]:
    return [total - float(meta.get("llm_ms", 0.0)) for total, meta in delivered(db, since_id)]


def _sent_count(db: Engine) -> int:
    with db.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM outbox WHERE state = 'sent'")).scalar_one()
    return int(count)


def _answered_after(db: Engine, message_id: int) -> bool:
    """Whether a message newer than ``message_id`` has a sent reply (an index range scan)."""
    with db.connect() as conn:
        found = conn.execute(
            text("SELECT 1 FROM outbox WHERE trigger_message_id > :id AND state = 'sent' LIMIT 1"),
            {"id": message_id},
        ).first()
    return found is not None


def _max_message_id(db: Engine) -> int:
    with db.connect() as conn:
        value = conn.execute(text("SELECT coalesce(max(id), 0) FROM messages")).scalar_one()
    return int(value)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its threads (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _run(
    base_url: str,
    db_url: str,
    turns: int,
    burst: int,
    conversations: int,
    processes: dict[str, int],
) -> dict[str, Any]:
    # One pooled connection for all polling: a connection per poll would fork a Postgres
    # backend every few milliseconds and bill the benchmark's own load to Hubbub.
    db = create_engine(db_url, pool_size=1, max_overflow=0)
    try:
        return _measure(base_url, db, turns, burst, conversations, processes)
    finally:
        db.dispose()


def _measure(
    base_url: str,
    db: Engine,
    turns: int,
    burst: int,
    conversations: int,
    processes: dict[str, int],
) -> dict[str, Any]:
    client = httpx.Client(base_url=base_url, timeout=60)
    for i in range(20):  # warm-up: imports, connections, prompt build
        client.post(f"/api/webchat/warm{i % 4}/messages", json={"text": "warm up"})
    wait_until(lambda: _sent_count(db) >= 20, timeout=120, what="warm-up")

    since = _max_message_id(db)
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    for i in range(turns):
        last = _max_message_id(db)
        client.post("/api/webchat/sequential/messages", json={"text": f"turn {i}"})
        wait_until(partial(_answered_after, db, last), timeout=60, interval=0.01)
    cpu_ms = {
        name: round((cpu_seconds(pid) - cpu_before[name]) * 1000 / turns, 2)
        for name, pid in processes.items()
    }
    overheads = _overheads(db, since)

    base = _sent_count(db)
    started = time.perf_counter()

    def send(i: int) -> None:
        response = client.post(
            f"/api/webchat/burst{i % conversations}/messages", json={"text": f"b{i}"}
        )
        response.raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, range(burst)))
    accepted = time.perf_counter() - started
    wait_until(lambda: _sent_count(db) >= base + burst, timeout=600, interval=0.02)
    elapsed = time.perf_counter() - started
    client.close()
    return {
        "sequential_turns": len(overheads),
        "overhead_ms_p50": round(statistics.median(overheads), 2),
        "overhead_ms_p99": round(_percentile(overheads, 0.99), 2),
        "overhead_ms_mean": round(statistics.fmean(overheads), 2),
        "cpu_ms_per_sequential_turn": cpu_ms | {"total": round(sum(cpu_ms.values()), 2)},
        "burst_turns": burst,
        "burst_conversations": conversations,
        "intake_messages_per_second": round(burst / accepted, 1),
        "turns_per_second": round(burst / elapsed, 1),
    }


def bench_redis(llm_url: str, turns: int, burst: int, conversations: int) -> dict[str, Any]:
    """Gateway + one worker process on Postgres and Redis."""
    db_url = _fresh_postgres()
    redis.Redis.from_url(REDIS_URL).flushdb()
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        env = _env(
            Path(home),
            llm_url,
            HUBBUB_DATABASE_URL=db_url,
            HUBBUB_REDIS_URL=REDIS_URL,
            HUBBUB_PORT=str(port),
        )
        gateway = ServiceProcess(["gateway"], env, "")
        _wait_http(port)
        worker = ServiceProcess(["worker"], env | {"HUBBUB_LOG_LEVEL": "INFO"}, "worker ready")
        worker.wait_ready()
        try:
            pids = {"gateway": gateway.proc.pid, "worker": worker.proc.pid}
            result = _run(f"http://127.0.0.1:{port}", db_url, turns, burst, conversations, pids)
        finally:
            worker.kill()
            gateway.kill()
    return {"deployment": "postgres+redis, 1 worker process", **result}


def bench_embedded(llm_url: str, turns: int, burst: int, conversations: int) -> dict[str, Any]:
    """``hubbub up`` alone on SQLite."""
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        env = _env(Path(home), llm_url, HUBBUB_PORT=str(port))
        service = ServiceProcess(["up"], env, "")
        _wait_http(port)
        db_url = f"sqlite:///{Path(home) / 'hubbub.db'}"
        try:
            pids = {"hubbub up": service.proc.pid}
            result = _run(f"http://127.0.0.1:{port}", db_url, turns, burst, conversations, pids)
        finally:
            service.kill()
    return {"deployment": "embedded (SQLite, in-process turns)", **result}


def main() -> None:
    """Run the selected deployments and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["redis", "embedded", "both"], default="both")
    parser.add_argument("--turns", type=int, default=200, help="sequential turns for overhead")
    parser.add_argument("--burst", type=int, default=1000, help="messages in the throughput burst")
    parser.add_argument("--conversations", type=int, default=100)
    args = parser.parse_args()
    probe = speed_probe_ms()
    server = LLMServerThread()
    fake = server.start()
    results = []
    try:
        if args.mode in ("redis", "both"):
            results.append(bench_redis(fake.base_url, args.turns, args.burst, args.conversations))
        if args.mode in ("embedded", "both"):
            results.append(
                bench_embedded(fake.base_url, args.turns, args.burst, args.conversations)
            )
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "benchmark": "pipeline",
                "machine": machine(probe),
                "fake_provider_latency_ms": 0,
                "results": results,
            },
            indent=2,
        )
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
