"""Telegram photos through the real gateway: fetched from the fake Bot API, stored by
reference, shown to vision models as image parts and to other models as a note.

Each test starts its own gateway (polling) with the model and image cap it is about, a
fake Bot API serving real PNG bytes, and the fake provider recording what it was sent.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_core.db.models import Media, MediaBlob, MediaState, Message
from tests.fixtures.images import image_bytes
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.telegram import TOKEN, FakeTelegram, TelegramServerThread
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

PAYLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "payloads" / "telegram"
CHAT = 111111111
PNG = image_bytes("png")
PNG_B64 = base64.b64encode(PNG).decode()
VISION_MODEL = "openai/gpt-4o-mini"


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    data.pop("update_id", None)
    return data


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


@pytest.fixture
def start(
    sqlite_template: Path, tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> Iterator[Any]:
    """Start a polling gateway with these settings (one per test)."""
    started: list[GatewayServer] = []

    def _start(**settings: Any) -> GatewayServer:
        shutil.copy(sqlite_template, tmp_path / "hubbub.db")
        env = hubbub_env(
            db_url=f"sqlite:///{tmp_path / 'hubbub.db'}",
            home=tmp_path,
            fake=fake_llm,
            telegram_token=TOKEN,
            telegram_api_base=telegram.api_base,
            **settings,
        )
        gateway = GatewayServer(settings_from_env(env)).start()
        started.append(gateway)
        wait_until(lambda: telegram.calls("getUpdates"), what="polling to start")
        return gateway

    yield _start
    for gateway in started:
        gateway.stop()


def replied(telegram: FakeTelegram) -> dict[str, Any]:
    sent: dict[str, Any] = wait_until(
        lambda: (s := telegram.sent_messages(CHAT)) and s[0], what="the reply"
    )
    return sent


def last_user_content(fake_llm: FakeLLM) -> Any:
    (request,) = fake_llm.chat_requests()
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def media_rows(gateway: GatewayServer) -> list[Media]:
    with gateway.runtime.factory() as db:
        return list(db.scalars(select(Media)))


def assert_no_base64_in_messages(gateway: GatewayServer) -> None:
    with gateway.runtime.factory() as db:
        for message in db.scalars(select(Message)):
            stored = json.dumps([message.content, message.meta, message.tool_calls])
            assert PNG_B64[:32] not in stored
            assert "base64" not in stored


def test_a_photo_reaches_a_vision_model_as_an_image_part(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = start(model=VISION_MODEL)
    telegram.add_file("photo-large", PNG)
    update = payload("private_photo")
    update["message"]["caption"] = "what is this?"
    telegram.push_update(update)
    assert replied(telegram)["text"] == "echo: what is this?"
    assert last_user_content(fake_llm) == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    ]
    assert telegram.downloads == ["photos/photo-large.bin"], "the largest size, fetched once"
    (media,) = media_rows(gateway)
    assert media.state == MediaState.READY
    assert media.content_type == "image/png"
    assert media.size_bytes == len(PNG)
    assert media.platform_ref == "photo-large"
    with gateway.runtime.factory() as db:
        assert db.get(MediaBlob, media.id).data == PNG
        message = db.get(Message, media.message_id)
        assert message.meta["media"] == [media.id]
        assert message.content == "what is this?"
    assert_no_base64_in_messages(gateway)


def test_a_text_model_reads_that_an_image_was_sent(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = start()
    telegram.add_file("photo-large", PNG)
    telegram.push_update(payload("private_photo"))
    assert replied(telegram)["text"] == "echo: [image: photo.jpg, 1280x1280]"
    assert last_user_content(fake_llm) == "[image: photo.jpg, 1280x1280]"
    assert media_rows(gateway)[0].state == MediaState.READY
    assert_no_base64_in_messages(gateway)


def test_an_oversized_image_is_refused_with_a_note_and_the_turn_goes_on(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = start(model=VISION_MODEL, image_max_bytes=len(PNG) - 1)
    telegram.add_file("doc-png", PNG, "documents/dashboard.png")
    telegram.push_update(payload("private_image_document"))
    note = "[image dashboard.png could not be included: larger than the 1019 bytes limit]"
    assert replied(telegram)["text"] == f"echo: the dashboard\n{note}"
    assert last_user_content(fake_llm) == f"the dashboard\n{note}"
    assert telegram.downloads == [], "getFile's size was enough to refuse it"
    (media,) = media_rows(gateway)
    assert (media.state, media.sha256) == (MediaState.REFUSED, None)
    with gateway.runtime.factory() as db:
        assert db.scalars(select(MediaBlob)).all() == []


def test_a_file_that_is_no_image_is_refused_whatever_it_claims(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = start(model=VISION_MODEL)
    telegram.add_file("doc-png", b"<html><body>not a png</body></html>", "documents/x.png")
    telegram.push_update(payload("private_image_document"))
    note = "[image dashboard.png could not be included: not a PNG, JPEG, GIF or WebP image]"
    assert last_user_content_when_replied(telegram, fake_llm) == f"the dashboard\n{note}"
    assert media_rows(gateway)[0].state == MediaState.REFUSED


def test_a_file_telegram_no_longer_has_is_a_note_not_a_failed_turn(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    start(model=VISION_MODEL)
    telegram.push_update(payload("private_image_document"))
    content = last_user_content_when_replied(telegram, fake_llm)
    assert (
        content
        == "the dashboard\n[image dashboard.png could not be included: getFile failed (400)]"
    )


def test_only_the_latest_image_is_sent_again_as_bytes(
    start: Any, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    start(model=VISION_MODEL)
    telegram.add_file("photo-large", PNG)
    telegram.add_file("doc-png", image_bytes("jpg"), "documents/dashboard.jpg")
    telegram.push_update(payload("private_photo"))
    replied(telegram)
    second = copy.deepcopy(payload("private_image_document"))
    second["message"]["message_id"] = 1402
    telegram.push_update(second)
    wait_until(lambda: len(telegram.sent_messages(CHAT)) == 2, what="the second reply")
    last = fake_llm.chat_requests()[-1]
    users = [m["content"] for m in last["messages"] if m["role"] == "user"]
    assert users[0] == "[image: photo.jpg, 1280x1280]"
    assert users[1][0] == {"type": "text", "text": "the dashboard"}
    assert users[1][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def last_user_content_when_replied(telegram: FakeTelegram, fake_llm: FakeLLM) -> Any:
    replied(telegram)
    return last_user_content(fake_llm)
