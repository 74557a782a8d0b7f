"""Text no database can hold, from Telegram and Slack: cleaned at the boundary, stored, 200.

After a valid secret or signature, a lone surrogate (a JSON ``\\ud800`` escape) or a NUL used
to fail the store and answer 503, so the platform retried forever a message that could
never be stored. Now it is stored cleaned; one empty once cleaned is acknowledged and
dropped.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.models import Message
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    load_payload,
    sign,
)
from tests.fixtures.platform_servers.telegram import TOKEN, FakeTelegram, TelegramServerThread
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

PAYLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "payloads" / "telegram"
SECRET = "text-Secret_9"
HOSTILE = "deploy \ud800 at\x00 noon\x07"
CLEANED = "deploy \ufffd at noon"


def ascii_json(payload: dict[str, Any]) -> bytes:
    """``payload`` as a platform sends it: JSON with ``\\uXXXX`` escapes."""
    return json.dumps(payload, ensure_ascii=True).encode()


def user_rows(gateway: GatewayServer) -> list[tuple[str | None, str | None]]:
    with gateway.runtime.factory() as db:
        rows = db.scalars(select(Message).where(Message.role == "user").order_by(Message.id))
        return [(m.content, m.speaker_name) for m in rows]


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


def telegram_update(update_id: int, message_id: int, text: str, name: str) -> dict[str, Any]:
    update: dict[str, Any] = json.loads((PAYLOADS / "private_text.json").read_text("utf-8"))
    update = copy.deepcopy(update)
    update["update_id"] = update_id
    update["message"] |= {"message_id": message_id, "text": text}
    update["message"]["from"] |= {"first_name": name, "last_name": ""}
    return update


class TestTelegram:
    def test_webhook_stores_cleaned_text_and_answers_200(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        telegram: FakeTelegram,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(
            db_url=db_url,
            home=tmp_path,
            fake=fake_llm,
            telegram_token=TOKEN,
            telegram_api_base=telegram.api_base,
            public_url="https://hubbub.example.com",
            telegram_webhook_secret=SECRET,
        )
        gateway = gateway_factory(settings_from_env(env))
        wait_until(lambda: telegram.calls("setWebhook"), what="webhook registration")
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "content-type": "application/json"}
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:

            def post(update: dict[str, Any]) -> int:
                response = client.post(
                    "/webhooks/telegram/default", content=ascii_json(update), headers=headers
                )
                return response.status_code

            assert post(telegram_update(900_000_001, 2001, HOSTILE, "Ann\udc00\x00")) == 200
            assert post(telegram_update(900_000_002, 2002, "\x00\x01", "Ann")) == 200
        assert user_rows(gateway) == [(CLEANED, "Ann\ufffd")]

    def test_polling_stores_cleaned_text(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        telegram: FakeTelegram,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(
            db_url=db_url,
            home=tmp_path,
            fake=fake_llm,
            telegram_token=TOKEN,
            telegram_api_base=telegram.api_base,
        )
        gateway = gateway_factory(settings_from_env(env))
        telegram.push_update(telegram_update(900_000_011, 2011, "\x00", "Ann"))
        telegram.push_update(telegram_update(900_000_012, 2012, HOSTILE, "Ann"))
        wait_until(lambda: user_rows(gateway), what="the stored message")
        assert user_rows(gateway) == [(CLEANED, "Ann")]


class TestSlack:
    def test_signed_event_stores_cleaned_text_and_answers_200(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        fake_slack: FakeSlack,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(
            db_url=db_url,
            home=tmp_path,
            fake=fake_llm,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_base=fake_slack.api_base,
        )
        gateway = gateway_factory(settings_from_env(env))

        def event(text: str, ts: str) -> bytes:
            payload = load_payload("message_channel")
            payload["event_id"] = f"Ev{ts.replace('.', '')}"
            payload["event"] |= {"text": text, "ts": ts, "event_ts": ts, "blocks": []}
            return ascii_json(payload)

        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            for body in (event(HOSTILE, "1732799200.000100"), event("\x00", "1732799201.000100")):
                headers = sign(body) | {"Content-Type": "application/json"}
                response = client.post("/webhooks/slack/default", content=body, headers=headers)
                assert response.status_code == 200, response.text
        assert user_rows(gateway) == [(CLEANED, "Carol Chen")]
