"""Text no database can hold, through the web chat: cleaned once at the boundary, stored.

A lone surrogate arrives over HTTP as a JSON ``\\ud800`` escape; NUL as ``\\u0000``. Both
used to be a 500 (SQLite cannot encode the one, Postgres refuses the other).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.models import Message
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(
    db_url: str, fake_llm: FakeLLM, tmp_path: Path, gateway_factory: Callable[..., GatewayServer]
) -> GatewayServer:
    env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm)
    return gateway_factory(settings_from_env(env))


def post_raw(client: httpx.Client, conversation_id: str, body: dict[str, Any]) -> httpx.Response:
    """Post ``body`` as JSON with ASCII escapes, as a browser sends a lone surrogate."""
    return client.post(
        f"/api/webchat/{conversation_id}/messages",
        content=json.dumps(body, ensure_ascii=True).encode(),
        headers={"content-type": "application/json"},
    )


def stored_users(gateway: GatewayServer) -> list[tuple[str | None, str | None, str | None]]:
    with gateway.runtime.factory() as db:
        rows = db.scalars(select(Message).where(Message.role == "user").order_by(Message.id))
        return [(m.content, m.speaker_name, m.platform_message_id) for m in rows]


def test_lone_surrogates_and_controls_are_cleaned_and_stored(
    client: httpx.Client, gateway: GatewayServer
) -> None:
    surrogate = post_raw(
        client, "c1", {"text": "half \ud83d of a smile", "user": "ann\udc00", "id": "s\ud800"}
    )
    nul = post_raw(client, "c1", {"text": "nul\x00 and\x1b esc\tkept\r\n", "id": "m\x00-1"})
    assert (surrogate.status_code, nul.status_code) == (202, 202), (surrogate.text, nul.text)
    assert nul.json()["duplicate"] is False
    # Web chat ids are stored as a per-conversation key, so only what was said is compared.
    assert [(text, name) for text, name, _ in stored_users(gateway)] == [
        ("half \ufffd of a smile", "ann\ufffd"),
        ("nul and esc\tkept\r\n", None),
    ]
    again = post_raw(client, "c1", {"text": "nul again", "id": "m-1"})
    assert again.json()["duplicate"] is True, "the id is kept as cleaned"
    again = post_raw(client, "c1", {"text": "surrogate again", "id": "s\ufffd"})
    assert again.json()["duplicate"] is True, "the cleaned id is the one deduplicated"


@pytest.mark.parametrize("text", ["\x00", "\x00\x01\x02", " \x00 \x07 "])
def test_text_empty_once_cleaned_is_a_400_and_nothing_is_stored(
    client: httpx.Client, gateway: GatewayServer, text: str
) -> None:
    response = post_raw(client, "c2", {"text": text})
    assert response.status_code == 400
    assert response.json() == {"error": "message text is empty"}
    assert stored_users(gateway) == []
    assert post_raw(client, "c2", {"text": "still here"}).status_code == 202
