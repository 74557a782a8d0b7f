"""Slack image files through the real gateway: ``url_private`` read with the bot token in the
worker, stored by reference, and shown to a vision model as an image part."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.models import Media, MediaState
from tests.fixtures.images import image_bytes
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    load_payload,
    sign,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

WEBHOOK = "/webhooks/slack/default"
JPEG = image_bytes("jpg")


@pytest.fixture
def gateway(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(
        db_url=sqlite_url,
        home=tmp_path,
        fake=fake_llm,
        model="openai/gpt-4o-mini",
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_base=fake_slack.api_base,
    )
    return gateway_factory(settings_from_env(env))


def post_event(client: httpx.Client, payload: dict[str, Any]) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = sign(body) | {"Content-Type": "application/json"}
    return client.post(WEBHOOK, content=body, headers=headers)


def shared(text: str, ts: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    payload = load_payload("message_channel")
    payload["event_id"] = f"Ev{ts.replace('.', '')}"
    payload["event"] |= {
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "user": "U0ALICE",
        "subtype": "file_share",
        "files": files,
    }
    return payload


def test_a_shared_image_reaches_a_vision_model_read_with_the_bot_token(
    client: httpx.Client, fake_slack: FakeSlack, fake_llm: FakeLLM, gateway: GatewayServer
) -> None:
    image = fake_slack.add_file(
        "F0IMG1", JPEG, name="graph.jpg", mimetype="image/jpeg", width=16, height=16
    )
    other = fake_slack.add_file(
        "F0DOC1", b"%PDF-1.7\n", name="notes.pdf", mimetype="application/pdf", width=0, height=0
    )
    event = shared("<@U0HUBBUB> what does this graph say?", "1732799300.000100", [image, other])
    assert post_event(client, event).status_code == 200
    wait_until(lambda: fake_slack.posted(), what="the reply")
    (request,) = fake_llm.chat_requests()
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    assert content[0]["type"] == "text"
    assert content[0]["text"].endswith("what does this graph say?\n[file: notes.pdf]")
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/jpeg;base64,{base64.b64encode(JPEG).decode()}"},
    }
    assert fake_slack.file_downloads == [("/files-pri/T0TEAM01-F0IMG1/graph.jpg", BOT_TOKEN)]
    with gateway.runtime.factory() as db:
        (media,) = db.scalars(select(Media)).all()
    assert (media.state, media.content_type, media.filename) == (
        MediaState.READY,
        "image/jpeg",
        "graph.jpg",
    )
