"""Workers outlive their dependencies: Redis and Postgres restarts, lost workers.

Every worker here is a real ``hubbub worker`` process on a private Redis or Postgres that
the test restarts; replies come from the fake provider over HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import redis

from agent_core.db.migrations import upgrade_to_head
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.restartable import PrivatePostgres, PrivateRedis
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    conversation,
    free_port,
    hubbub_env,
    post_accepted,
    replies,
    settings_from_env,
    start_up,
    start_worker,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_env(
    postgres_url: str, private_redis: PrivateRedis, fake_llm: FakeLLM, tmp_path: Path
) -> dict[str, str]:
    return hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=private_redis.url
    )


@pytest.fixture
def redis_client(
    redis_env: dict[str, str], gateway_factory: Callable[..., GatewayServer]
) -> Iterator[httpx.Client]:
    gateway = gateway_factory(settings_from_env(redis_env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
        yield c


def _answered_once(client: httpx.Client, conversation_id: str, text: str) -> None:
    (reply,) = replies(client, conversation_id)
    assert reply["text"] == f"echo: {text}"
    assert [m["text"] for m in conversation(client, conversation_id)].count(text) == 1


def test_worker_with_turns_in_flight_survives_a_redis_restart(
    redis_client: httpx.Client,
    redis_env: dict[str, str],
    private_redis: PrivateRedis,
    fake_llm: FakeLLM,
    processes: list[ServiceProcess],
) -> None:
    worker = start_worker(redis_env)
    processes.append(worker)
    fake_llm.sleep_next(3, times=2)
    post_accepted(redis_client, "a", "in flight a")
    post_accepted(redis_client, "b", "in flight b")
    wait_until(lambda: len(fake_llm.chat_requests()) == 2, timeout=60, what="two slow calls")
    private_redis.restart()
    for name in ("a", "b"):
        wait_replies(redis_client, name, 1, timeout=120)
    post_accepted(redis_client, "c", "after the restart")
    wait_replies(redis_client, "c", 1, timeout=120)
    assert worker.proc.poll() is None, "".join(worker.lines[-40:])
    _answered_once(redis_client, "a", "in flight a")
    _answered_once(redis_client, "b", "in flight b")
    _answered_once(redis_client, "c", "after the restart")


def test_worker_survives_a_postgres_restart(
    private_postgres: PrivatePostgres,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    upgrade_to_head(private_postgres.url)
    env = hubbub_env(db_url=private_postgres.url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    gateway = gateway_factory(settings_from_env(env))
    worker = start_worker(env)
    processes.append(worker)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "before", "before the crash")
        wait_replies(client, "before", 1, timeout=120)
        fake_llm.sleep_next(3)
        post_accepted(client, "during", "during the crash")
        wait_until(lambda: len(fake_llm.chat_requests()) == 2, timeout=60, what="the slow call")
        private_postgres.restart()
        # The gateway's first read on a stale pooled connection fails once (not the worker's
        # concern here): wait until it reads again.
        wait_until(
            lambda: client.get("/api/webchat/before/messages").status_code == 200,
            timeout=60,
            what="the gateway reading again",
        )
        wait_replies(client, "during", 1, timeout=120)
        post_accepted(client, "after", "after the crash")
        wait_replies(client, "after", 1, timeout=120)
        assert worker.proc.poll() is None, "".join(worker.lines[-40:])
        _answered_once(client, "before", "before the crash")
        _answered_once(client, "during", "during the crash")
        _answered_once(client, "after", "after the crash")


def test_worker_started_with_postgres_down_sweeps_once_it_is_back(
    private_postgres: PrivatePostgres,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    upgrade_to_head(private_postgres.url)
    env = hubbub_env(db_url=private_postgres.url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "lost", "nobody rang for me")
        redis.Redis.from_url(redis_url).flushdb()  # the doorbell is lost: only a sweep finds it
        private_postgres.stop("immediate")
        worker = start_worker(env)
        processes.append(worker)
        wait_until(
            lambda: any("sweep failed" in line for line in worker.lines),
            timeout=60,
            what="a failed first sweep",
        )
        private_postgres.start()
        wait_until(
            lambda: client.get("/api/webchat/lost/messages").status_code == 200,
            timeout=60,
            what="the gateway reading again",
        )
        wait_replies(client, "lost", 1, timeout=120)
        _answered_once(client, "lost", "nobody rang for me")


def test_two_workers_on_one_metrics_port_both_run(
    redis_client: httpx.Client,
    redis_env: dict[str, str],
    processes: list[ServiceProcess],
) -> None:
    port = free_port()
    env = redis_env | {"HUBBUB_WORKER_METRICS_PORT": str(port)}
    first = start_worker(env)
    processes.append(first)
    second = start_worker(env)
    processes.append(second)
    (warning,) = [json.loads(line) for line in second.lines if "metrics not served" in line]
    assert warning["level"] == "warning"
    assert str(port) in warning["msg"]
    assert "HUBBUB_WORKER_METRICS_PORT" in warning["msg"]
    assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
    first.signal(signal.SIGTERM)
    assert first.wait(60) == 0
    post_accepted(redis_client, "second", "the second worker answers")
    wait_replies(redis_client, "second", 1, timeout=120)
    _answered_once(redis_client, "second", "the second worker answers")


def _worker_pids(service: ServiceProcess) -> list[int]:
    """Pids of the worker children ``hubbub up`` started, from its log."""
    pids = []
    for line in list(service.lines):
        if line.startswith("{") and '"worker started"' in line:
            pids.append(int(json.loads(line)["pid"]))
    return pids


def test_up_restarts_its_worker_when_it_dies(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    port = free_port()
    service = start_up(env, port)
    processes.append(service)
    (first,) = wait_until(lambda: _worker_pids(service), timeout=60, what="the worker child")
    os.kill(first, signal.SIGKILL)
    pids = wait_until(
        lambda: len(p := _worker_pids(service)) == 2 and p, timeout=60, what="a new worker"
    )
    assert pids[1] != first
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        post_accepted(client, "up", "still answered")
        (reply,) = wait_replies(client, "up", 1, timeout=120)
    assert reply["text"] == "echo: still answered"
    service.signal(signal.SIGTERM)
    assert service.wait(60) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pids[1], 0)  # stopping `hubbub up` stopped its worker


def test_a_worker_whose_up_was_killed_outright_stops(
    postgres_url: str,
    redis_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    processes: list[ServiceProcess],
) -> None:
    """SIGKILL leaves `hubbub up` no chance to stop its worker: the worker stops itself."""
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    service = start_up(env, free_port())
    processes.append(service)
    (child,) = wait_until(lambda: _worker_pids(service), timeout=60, what="the worker child")
    service.kill()

    def gone() -> bool:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state == "Z"

    wait_until(gone, timeout=90, what="the orphaned worker to stop")


@pytest.fixture
def lease_env(
    postgres_url: str, redis_url: str, fake_llm: FakeLLM, tmp_path: Path
) -> dict[str, str]:
    """A deployment with the default turn lease and sweep interval (not the tests' short ones)."""
    env = hubbub_env(db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url)
    del env["HUBBUB_TURN_LEASE_SECONDS"], env["HUBBUB_SWEEP_INTERVAL_SECONDS"]
    return env


def _turn_lease(gateway: GatewayServer) -> tuple[int, datetime] | None:
    """The pid of the worker holding the turn lease, and when that lease runs out."""
    from sqlalchemy import select

    from agent_core.db.engine import transaction
    from agent_core.db.models import SessionLock

    with transaction(gateway.runtime.factory) as db:
        row = db.execute(
            select(SessionLock.owner, SessionLock.expires_at).where(SessionLock.kind == "turn")
        ).first()
    return (int(row.owner.split(":")[1]), row.expires_at) if row else None


def test_a_killed_workers_session_is_taken_over_within_lease_and_sweep(
    lease_env: dict[str, str],
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    settings = settings_from_env(lease_env)
    assert settings.turn_lease_seconds + settings.sweep_interval_seconds <= 10
    gateway = gateway_factory(settings)
    workers = {w.proc.pid: w for w in (start_worker(lease_env), start_worker(lease_env))}
    processes.extend(workers.values())
    fake_llm.sleep_next(120)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "k", "take me over")
        wait_until(lambda: len(fake_llm.chat_requests()) == 1, timeout=60, what="the slow call")
        victim, first_expiry = wait_until(
            lambda: _turn_lease(gateway), timeout=60, what="the holder"
        )
        # The holder renews while its call runs, and its lease never reaches further ahead than
        # one lease: once it dies, the session is free within a lease and rung by the next sweep.
        renewed = wait_until(
            lambda: (lease := _turn_lease(gateway)) and lease[1] > first_expiry and lease,
            timeout=60,
            what="a renewal",
        )
        read_at = datetime.now(UTC)
        assert renewed[0] == victim
        assert renewed[1] <= read_at + timedelta(seconds=settings.turn_lease_seconds)
        workers[victim].kill()
        wait_until(lambda: len(fake_llm.chat_requests()) == 2, timeout=120, what="the takeover")
        (reply,) = wait_replies(client, "k", 1, timeout=120)
        assert reply["text"] == "echo: take me over"
        _answered_once(client, "k", "take me over")
        holder = _turn_lease(gateway)
        assert holder is None or holder[0] != victim, "the other worker took the session over"


def test_a_model_call_longer_than_the_lease_keeps_it(
    lease_env: dict[str, str],
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> None:
    settings = settings_from_env(lease_env)
    gateway = gateway_factory(settings)
    processes.extend([start_worker(lease_env), start_worker(lease_env)])
    fake_llm.sleep_next(settings.turn_lease_seconds * 1.5)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "long", "first, slowly")
        wait_until(lambda: len(fake_llm.chat_requests()) == 1, timeout=60, what="the slow call")
        post_accepted(client, "long", "second")
        first, second = wait_replies(client, "long", 2, timeout=120)
    assert (first["text"], second["text"]) == ("echo: first, slowly", "echo: second")
    asked = [r["messages"][-1]["content"] for r in fake_llm.chat_requests()]
    assert asked == ["first, slowly", "second"]


@pytest.fixture
def redis_without_brpop(tmp_path: Path) -> Iterator[str]:
    """A Redis that refuses the command workers consume with: Celery cannot carry on."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--dir", str(tmp_path),
         "--rename-command", "BRPOP", ""],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    wait_until(lambda: _pings(url), timeout=60, what="redis without BRPOP")
    yield url
    server.kill()
    server.wait(30)


def _pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def test_a_worker_that_cannot_carry_on_exits_non_zero(
    postgres_url: str,
    redis_without_brpop: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    processes: list[ServiceProcess],
) -> None:
    env = hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_without_brpop
    )
    worker = ServiceProcess(["worker"], env, "Unrecoverable error")
    processes.append(worker)
    assert worker.wait(120) != 0, "".join(worker.lines[-40:])
