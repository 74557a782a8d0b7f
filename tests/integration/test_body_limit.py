"""``HUBBUB_MAX_BODY_BYTES``: bodies over the limit get a 413 before they are buffered.

Before the limit, every route read its body in full first: a 200 MB body without any
credentials took the gateway from ~300 MB to over 1 GB.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from agent_core.db.models import Message
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    SlackServerThread,
    load_payload,
    sign,
)
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    free_port,
    hubbub_env,
    settings_from_env,
    start_up,
    wait_until,
)

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
CHUNK = b"x" * (64 * 1024)


def rss_bytes(pid: int) -> int:
    """The resident memory of a process, from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def raw_request(port: int, path: str, total: int, *, chunked: bool) -> bytes:
    """Send ``total`` bytes of body as fast as the server takes them; return its answer.

    The body goes out on this thread while another reads, so an early answer (and the
    server closing the connection) ends the upload.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=180)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        "Content-Type: application/json\r\n"
        f"{framing}\r\n\r\n".encode()
    )
    answer = bytearray()
    done = threading.Event()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
        except OSError:
            pass
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        while sent < total and not answer and not done.is_set():
            piece = CHUNK[: total - sent]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            sent += len(piece)
        if chunked and sent >= total:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server answered and closed while the body was still coming
    wait_until(done.is_set, timeout=180, what="the server to answer and close")
    sock.close()
    return bytes(answer)


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


@pytest.fixture
def up(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[ServiceProcess, int]]:
    port = free_port()
    proc = start_up(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=None), port)
    yield proc, port
    proc.kill()


class TestMemoryStaysBounded:
    @pytest.mark.parametrize("chunked", [True, False], ids=["streamed", "content-length"])
    def test_200_mb_body_without_credentials_is_a_413_and_never_buffered(
        self, up: tuple[ServiceProcess, int], chunked: bool
    ) -> None:
        proc, port = up
        path = "/api/webchat/c1/messages"
        assert status_of(raw_request(port, path, 1000, chunked=chunked)) == 400, "warm"
        before = rss_bytes(proc.proc.pid)
        answer = raw_request(port, path, 200 * MiB, chunked=chunked)
        after = rss_bytes(proc.proc.pid)
        assert status_of(answer) == 413
        assert after - before < 50 * MiB, f"RSS grew by {(after - before) / MiB:.0f} MiB"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            assert client.get("/healthz").status_code == 200, "still serving"


@pytest.fixture
def limited(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[tuple[GatewayServer, FakeSlack]]:
    with SlackServerThread() as slack:
        env = hubbub_env(
            db_url=sqlite_url,
            home=tmp_path,
            fake=fake_llm,
            max_body_bytes=8192,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_base=slack.api_base,
        )
        yield gateway_factory(settings_from_env(env)), slack


def stored_count(gateway: GatewayServer) -> int:
    with gateway.runtime.factory() as db:
        return int(db.scalar(select(func.count()).select_from(Message)) or 0)


def slack_event(text: str) -> bytes:
    payload: dict[str, Any] = load_payload("message_channel")
    payload["event"] |= {"text": text, "blocks": []}
    return json.dumps(payload).encode()


class TestConfiguredLimit:
    @pytest.mark.parametrize("chunked", [True, False], ids=["streamed", "content-length"])
    def test_signed_webhook_over_the_limit_is_a_413_before_verification(
        self, limited: tuple[GatewayServer, FakeSlack], chunked: bool
    ) -> None:
        gateway, slack = limited
        calls = len(slack.calls)
        body = slack_event("x" * 9000)
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            for headers in (sign(body), {}):
                headers |= {"Content-Type": "application/json"}
                content: Any = iter([body[:4000], body[4000:]]) if chunked else body
                response = client.post("/webhooks/slack/default", content=content, headers=headers)
                assert response.status_code == 413, response.text
                assert response.json() == {"error": "request body is larger than 8,192 bytes"}
            small = slack_event("within the limit")
            response = client.post(
                "/webhooks/slack/default",
                content=small,
                headers=sign(small) | {"Content-Type": "application/json"},
            )
            assert response.status_code == 200
        assert stored_count(gateway) == 1
        assert len(slack.calls) - calls <= 1, "only the small event looked up its speaker"


def test_the_longest_message_fits_the_default_limit(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = gateway_factory(
        settings_from_env(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    )
    text = "\U0001f600" * 32_000  # every character escaped as a surrogate pair: 384 KB
    body = json.dumps({"text": text}).encode()
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        response = client.post(
            "/api/webchat/c1/messages", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 202, response.text
