"""The OpenAPI document lists every answer the routes actually give.

Requests are generated for every documented route (missing conversation, unknown bot,
empty text, bad JSON, JSON that is no object, an oversize body, signed and unsigned
webhooks); each status a route answered must be documented for it, with the error model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    SlackServerThread,
    load_payload,
    sign,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env

pytestmark = pytest.mark.integration

LIMIT = 4096
PATH_VALUES: dict[str, list[str]] = {
    "conversation_id": ["c-1", "never-used", "bad id!"],
    "platform": ["slack", "telegram"],
    "bot_id": ["default", "nobody"],
    "tenant": ["default", "nobody"],
    "bot": ["default"],
    "session_id": ["s-1"],
    "prefix": ["hbk_nothing"],
}
BODIES: list[bytes | None] = [
    None,
    json.dumps({"text": "hello"}).encode(),
    json.dumps({"text": ""}).encode(),
    json.dumps({"text": "\x00"}).encode(),
    json.dumps({"text": "x" * 101}).encode(),
    json.dumps({"text": 5}).encode(),
    b"{not json",
    b"null",
    b"[1, 2]",
    json.dumps(load_payload("message_im")).encode(),
    b"x" * (LIMIT + 1),
]


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[GatewayServer]:
    with SlackServerThread() as slack:
        env = hubbub_env(
            db_url=sqlite_url,
            home=tmp_path,
            fake=fake_llm,
            max_body_bytes=LIMIT,
            max_message_chars=100,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_base=slack.api_base,
        )
        yield gateway_factory(settings_from_env(env))


def concrete_paths(template: str) -> list[str]:
    paths = [template]
    for name in re.findall(r"{(\w+)}", template):
        paths = [p.replace(f"{{{name}}}", v) for p in paths for v in PATH_VALUES[name]]
    return paths


def header_variants(body: bytes | None) -> list[dict[str, str]]:
    plain = {"content-type": "application/json"}
    if body is None:
        return [{}]
    return [plain, plain | sign(body)]


def _streams(operation: dict[str, Any]) -> bool:
    ok = operation["responses"].get("200", {})
    return "text/event-stream" in ok.get("content", {})


def _answer(
    client: httpx.Client,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    operation: dict[str, Any],
) -> httpx.Response:
    """The route's answer; of an event stream only the status and the first event."""
    if not _streams(operation):
        return client.request(method, path, content=body, headers=headers)
    with client.stream(method, path, content=body, headers=headers) as response:
        if response.status_code == 200:
            next(response.iter_lines())
        else:
            response.read()
        return response


def test_every_answer_a_route_gives_is_documented(
    client: httpx.Client, gateway: GatewayServer
) -> None:
    doc: dict[str, Any] = client.get("/openapi.json").json()
    assert client.post("/api/webchat/c-1/messages", json={"text": "seed"}).status_code == 202
    undocumented: list[str] = []
    wrong_model: set[str] = set()
    seen: set[int] = set()
    for template, operations in doc["paths"].items():
        for method, operation in operations.items():
            documented = {int(code) for code in operation["responses"]}
            for path in concrete_paths(template):
                for body in BODIES:
                    for headers in header_variants(body):
                        response = _answer(client, method, path, body, headers, operation)
                        seen.add(response.status_code)
                        if response.status_code not in documented:
                            undocumented.append(
                                f"{method.upper()} {path} {body!r:.40} -> "
                                f"{response.status_code} {response.text[:80]}"
                            )
                        elif response.status_code >= 400:
                            answer = operation["responses"][str(response.status_code)]
                            schema = answer["content"]["application/json"]["schema"]
                            if not schema["$ref"].endswith("/ErrorBody"):
                                wrong_model.add(f"{template} {response.status_code}")
                            assert set(response.json()) == {"error"}, (path, response.text)
    assert undocumented == []
    assert wrong_model == set(), "error answers are documented with the error model"
    assert {400, 401, 404, 413, 422} <= seen, "the table reaches the error answers"
    assert not {500, 502, 504} & seen
