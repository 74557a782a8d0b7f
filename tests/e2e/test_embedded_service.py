"""``hubbub up`` as a user runs it: one process, embedded SQLite, no broker."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    ServiceProcess,
    free_port,
    hubbub_env,
    replies,
    start_up,
    wait_until,
)

pytestmark = pytest.mark.e2e


def _embedded_env(home: Path, fake: FakeLLM) -> dict[str, str]:
    env = hubbub_env(db_url="", home=home, fake=fake)
    del env["HUBBUB_DATABASE_URL"]  # the default: a SQLite file under HUBBUB_HOME
    return env


def test_up_migrates_and_answers(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    port = free_port()
    processes.append(start_up(_embedded_env(tmp_path, fake_llm), port))
    assert (tmp_path / "hubbub.db").is_file()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        assert client.post("/api/webchat/e2e/messages", json={"text": "ping"}).status_code == 202
        (reply,) = wait_until(lambda: replies(client, "e2e"), timeout=30, what="reply")
        assert reply["text"] == "echo: ping"


def test_message_accepted_before_a_crash_is_answered_after_restart(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    env = _embedded_env(tmp_path, fake_llm)
    port = free_port()
    first = start_up(env, port)
    processes.append(first)
    fake_llm.sleep_next(60)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        assert (
            client.post("/api/webchat/crash/messages", json={"text": "keep me"}).status_code == 202
        )
    wait_until(lambda: fake_llm.chat_requests(), timeout=30, what="the slow model call")
    first.kill()

    second = start_up(env, port)
    processes.append(second)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        (reply,) = wait_until(lambda: replies(client, "crash"), timeout=30, what="reply")
        assert reply["text"] == "echo: keep me"


def test_sigterm_answers_what_was_accepted_then_exits(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    env = _embedded_env(tmp_path, fake_llm)
    port = free_port()
    service = start_up(env, port)
    processes.append(service)
    fake_llm.delay = 1.0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        for i in range(3):
            response = client.post("/api/webchat/drain/messages", json={"text": f"m{i}"})
            assert response.status_code == 202
    service.signal(signal.SIGTERM)
    # uvicorn re-raises the signal after its graceful shutdown, as servers conventionally do.
    assert service.wait(60) in (0, -signal.SIGTERM)
    assert any("gateway stopped" in line for line in service.lines)
    fake_llm.delay = 0.0
    restarted = start_up(env, port)
    processes.append(restarted)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        answered = [r["text"] for r in replies(client, "drain")]
    assert answered == ["echo: m0", "echo: m1", "echo: m2"], "all were answered before exit"
    assert len(fake_llm.chat_requests()) == 3


def test_the_internal_port_keeps_docs_and_metrics_off_the_public_listener(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    port, internal = free_port(), free_port()
    env = _embedded_env(tmp_path, fake_llm) | {"HUBBUB_INTERNAL_PORT": str(internal)}
    processes.append(start_up(env, port))
    operator_paths = ("/metrics", "/docs", "/openapi.json", "/console/sign-in")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as public:
        for path in operator_paths:
            assert public.get(path).status_code == 404, path
        assert public.get("/healthz").status_code == 200
        assert public.post("/api/webchat/c/messages", json={"text": "hi"}).status_code == 202
    with httpx.Client(base_url=f"http://127.0.0.1:{internal}", timeout=30) as private:
        for path in operator_paths:
            assert private.get(path).status_code == 200, path
        assert "hubbub_inbound_messages_total" in private.get("/metrics").text
        assert private.get("/readyz").status_code == 200
        assert private.get("/api/webchat/status").status_code == 404


def test_is_up_is_announced_only_once_it_answers(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    port = free_port()
    env = _embedded_env(tmp_path, fake_llm) | {"HUBBUB_PORT": str(port)}
    service = ServiceProcess(["up"], env, "Hubbub is up at").wait_ready()
    processes.append(service)
    # No retry: the line is a promise that the gateway answers right now.
    response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
    assert response.status_code == 200
    assert any(f"Hubbub is up at http://127.0.0.1:{port}/" in line for line in service.lines)


def test_a_taken_port_is_one_clear_line_and_exit_1(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = _embedded_env(tmp_path, fake_llm) | {"HUBBUB_PORT": str(port)}
        service = ServiceProcess(["up"], env, "never printed")
        processes.append(service)
        assert service.wait(120) == 1
    output = "".join(service.lines)
    assert f"port {port} is in use — set HUBBUB_PORT or stop the other process" in output
    assert "Traceback" not in output
    assert "Hubbub is up" not in output
