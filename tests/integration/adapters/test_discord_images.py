"""Discord image attachments through the real gateway: fetched from the attachment URL in the
worker, stored by reference, shown to a vision model as an image part and named as a note to
a model without vision."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_core.db.models import Media, MediaState, Message
from tests.fixtures.images import image_bytes
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.discord import DM_ID, FakeDiscord, load_payload
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

GIF = image_bytes("gif")


def start(
    sqlite_url: str,
    tmp_path: Path,
    fake: FakeDiscord,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    **settings: Any,
) -> GatewayServer:
    env = hubbub_env(
        db_url=sqlite_url,
        home=tmp_path,
        fake=fake_llm,
        discord_token=fake.token,
        discord_api_base=fake.base_url,
        **settings,
    )
    server = gateway_factory(settings_from_env(env))
    wait_until(fake.connected, timeout=20, what="the gateway's Discord connection")
    return server


def dm_with_attachments(fake: FakeDiscord, *attachments: dict[str, Any]) -> dict[str, Any]:
    message = load_payload("message_create_private")
    message["content"] = "what is in the picture?"
    message["attachments"] = list(attachments)
    return message


def last_user_content(fake_llm: FakeLLM) -> Any:
    (request,) = fake_llm.chat_requests()
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_an_image_attachment_reaches_a_vision_model(
    sqlite_url: str,
    tmp_path: Path,
    fake: FakeDiscord,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = start(
        sqlite_url, tmp_path, fake, fake_llm, gateway_factory, model="openai/gpt-4o-mini"
    )
    image = fake.add_attachment(
        DM_ID, "logo.gif", GIF, content_type="image/gif", width=16, height=16
    )
    log = fake.add_attachment(DM_ID, "app.log", b"boom", content_type="text/plain")
    fake.push("MESSAGE_CREATE", dm_with_attachments(fake, image, log))
    wait_until(lambda: fake.sent_messages(DM_ID), timeout=20, what="the reply")
    assert last_user_content(fake_llm) == [
        {"type": "text", "text": "what is in the picture?\n[attachment: app.log]"},
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/gif;base64,{base64.b64encode(GIF).decode()}"},
        },
    ]
    assert fake.attachment_downloads == [f"/attachments/{DM_ID}/{image['id']}/logo.gif"]
    with gateway.runtime.factory() as db:
        (media,) = db.scalars(select(Media)).all()
        assert (media.state, media.content_type, media.width) == (MediaState.READY, "image/gif", 16)
        message = db.get(Message, media.message_id)
        assert message.content == "what is in the picture?\n[attachment: app.log]"


def test_an_expired_attachment_is_a_note_for_a_text_model(
    sqlite_url: str,
    tmp_path: Path,
    fake: FakeDiscord,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    start(sqlite_url, tmp_path, fake, fake_llm, gateway_factory)
    image = fake.add_attachment(
        DM_ID, "logo.gif", GIF, content_type="image/gif", width=16, height=16
    )
    image["url"] = image["url"].replace("logo.gif", "gone.gif")
    fake.push("MESSAGE_CREATE", dm_with_attachments(fake, image))
    wait_until(lambda: fake.sent_messages(DM_ID), timeout=20, what="the reply")
    assert last_user_content(fake_llm) == (
        "what is in the picture?\n[image logo.gif could not be included: the platform answered 404]"
    )
