"""Telegram through the real gateway: updates in (polling or webhook), turns, replies out.

The gateway runs in-process under uvicorn with the embedded pipeline, the fake provider is
reached through litellm over HTTP, and the fake Bot API stands in for Telegram. A polling
gateway and a webhook gateway are shared by the tests of their class (each test uses its
own chats); settings that change behaviour get a gateway of their own. Every gateway has a
fake Bot API of its own, so two pollers never take each other's updates.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_core.db.models import ChatSession, Message
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramFailure,
    TelegramServerThread,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = pytest.mark.integration

PAYLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "payloads" / "telegram"
SECRET = "e2e-Secret_42"
PUBLIC_URL = "https://hubbub.example.com"


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def retarget(update: dict[str, Any], chat_id: int) -> dict[str, Any]:
    """The update moved to chat ``chat_id`` (and, in a private chat, from that user), with
    no ``update_id`` so the fake numbers it after everything queued before."""
    update = copy.deepcopy(update)
    update.pop("update_id", None)
    message = update.get("message") or update["edited_message"]
    for m in (message, message.get("reply_to_message")):
        if m is None:
            continue
        private = m["chat"]["type"] == "private"
        m["chat"]["id"] = chat_id
        if private and not m["from"]["is_bot"]:
            m["from"]["id"] = chat_id
    return update


def stored(gateway: GatewayServer, chat_id: int) -> list[dict[str, Any]]:
    """Messages stored for a chat, oldest first."""
    with gateway.runtime.factory() as db:
        rows = db.execute(
            select(Message, ChatSession.thread_id)
            .join(ChatSession, Message.session_id == ChatSession.id)
            .where(ChatSession.platform == "telegram", ChatSession.chat_id == str(chat_id))
            .order_by(Message.id)
        ).all()
        return [
            {
                "role": m.role,
                "kind": m.kind,
                "content": m.content,
                "speaker": m.speaker_name,
                "platform_id": m.platform_message_id,
                "edited": m.edited_at is not None,
                "thread_id": thread_id,
            }
            for m, thread_id in rows
        ]


def sent_to(fake: FakeTelegram, chat_id: int, count: int = 1) -> list[dict[str, Any]]:
    """Wait until ``count`` messages went to the chat; return them."""
    found: list[dict[str, Any]] = wait_until(
        lambda: (s := fake.sent_messages(chat_id)) and len(s) >= count and s,
        what=f"{count} message(s) sent to {chat_id}",
    )
    return found


def user_turns(fake_llm: FakeLLM) -> list[list[str]]:
    """The user lines of every model request."""
    return [
        [m["content"] for m in r["messages"] if m["role"] == "user"]
        for r in fake_llm.chat_requests()
    ]


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    """A fake Bot API for one test (and the gateway it starts)."""
    with TelegramServerThread() as fake:
        yield fake


def start_gateway(
    db_url: str, home: Path, llm: FakeLLM, fake: FakeTelegram, **settings: Any
) -> GatewayServer:
    env = hubbub_env(
        db_url=db_url,
        home=home,
        fake=llm,
        telegram_token=TOKEN,
        telegram_api_base=fake.api_base,
        **settings,
    )
    return GatewayServer(settings_from_env(env)).start()


@pytest.fixture(scope="module")
def _module_db(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    home = tmp_path_factory.mktemp("telegram-gateway")
    shutil.copy(sqlite_template, home / "hubbub.db")
    return f"sqlite:///{home / 'hubbub.db'}", home


@pytest.fixture(scope="module")
def _polling(
    _module_db: tuple[str, Path], _llm_server: FakeLLM
) -> Iterator[tuple[GatewayServer, FakeTelegram]]:
    db_url, home = _module_db
    with TelegramServerThread() as fake:
        gateway = start_gateway(db_url, home, _llm_server, fake)
        wait_until(lambda: fake.calls("getUpdates"), what="polling to start")
        startup = [c.method for c in fake.calls()]
        assert startup[:3] == ["getMe", "deleteWebhook", "setMyCommands"]
        yield gateway, fake
        gateway.stop()


class TestPolling:
    """One polling gateway; each test talks in chats of its own."""

    @pytest.fixture
    def telegram(self, _polling: tuple[GatewayServer, FakeTelegram]) -> FakeTelegram:
        self.gateway, fake = _polling
        fake.reset()
        return fake

    def test_a_dm_gets_exactly_one_echo_reply(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_100_001
        telegram.push_update(retarget(payload("private_text"), chat))
        (sent,) = sent_to(telegram, chat)
        assert sent["text"] == "echo: Hello! Can you summarise RFC 9110 in three bullets?"
        assert sent["parse_mode"] == "HTML"
        assert "reply_parameters" not in sent
        second = retarget(payload("private_text"), chat)
        second["message"] |= {"message_id": 1366, "text": "thanks"}
        telegram.push_update(second)
        both = sent_to(telegram, chat, 2)
        assert [s["text"] for s in both] == [
            "echo: Hello! Can you summarise RFC 9110 in three bullets?",
            "echo: thanks",
        ]
        assert len(fake_llm.chat_requests()) == 2
        typing = telegram.calls("sendChatAction")
        assert typing
        assert typing[0].params == {"chat_id": str(chat), "action": "typing", "_ok": True}
        rows = stored(self.gateway, chat)
        assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
        assert rows[0]["platform_id"] == f"{chat}:1365"
        assert rows[0]["speaker"] == "Ann Lee"

    def test_group_records_context_and_answers_a_mention_with_a_reply(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        group = -1_004_100_002
        telegram.push_update(retarget(payload("group_unaddressed"), group))
        wait_until(lambda: stored(self.gateway, group), what="context stored")
        assert fake_llm.chat_requests() == []
        telegram.push_update(retarget(payload("group_mention"), group))
        (sent,) = sent_to(telegram, group)
        assert sent["reply_parameters"] == {"message_id": 302, "allow_sending_without_reply": True}
        assert (
            sent["_visible"] == "echo: [Борис Петров] @gw_bot what did we decide about the alerts?"
        )
        (turn,) = user_turns(fake_llm)
        assert turn == [
            "[Ann Lee] Deploy is done, the 2am alerts were a false alarm.",
            "[Борис Петров] @gw_bot what did we decide about the alerts?",
        ]
        assert len(telegram.sent_messages(group)) == 1, "the context message got no reply"

    def test_forum_topic_is_its_own_session_and_the_reply_stays_in_it(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        forum = -1_004_100_003
        general = retarget(payload("forum_general"), forum)
        general["message"]["text"] = "@gw_bot hello general"
        general["message"]["entities"] = [{"offset": 0, "length": 7, "type": "mention"}]
        telegram.push_update(general)
        sent_to(telegram, forum)
        telegram.push_update(retarget(payload("forum_topic_reply_mention"), forum))
        first, second = sent_to(telegram, forum, 2)
        assert "message_thread_id" not in first
        assert second["message_thread_id"] == "42"
        assert second["reply_parameters"]["message_id"] == 77
        assert {r["thread_id"] for r in stored(self.gateway, forum)} == {"", "42"}
        assert user_turns(fake_llm)[1] == ["[Ann Lee] @gw_bot and for topic 42?"], "own session"

    def test_an_edit_updates_the_transcript(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_100_004
        telegram.push_update(retarget(payload("private_text"), chat))
        sent_to(telegram, chat)
        telegram.push_update(retarget(payload("edited_private"), chat))
        wait_until(lambda: stored(self.gateway, chat)[0]["edited"], what="the edit")
        assert (
            stored(self.gateway, chat)[0]["content"] == "Hello! Summarise RFC 9110 in five bullets."
        )
        follow_up = retarget(payload("private_text"), chat)
        follow_up["message"] |= {"message_id": 1367, "text": "and?"}
        telegram.push_update(follow_up)
        sent_to(telegram, chat, 2)
        assert user_turns(fake_llm)[-1] == ["Hello! Summarise RFC 9110 in five bullets.", "and?"]
        assert len(fake_llm.chat_requests()) == 2, "an edit starts no turn"

    def test_own_messages_are_dropped_and_other_bots_are_context_only(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        group = -1_004_100_005
        for name in ("own_message", "sticker", "other_bot_author"):
            telegram.push_update(retarget(payload(name), group))
        rows = wait_until(lambda: stored(self.gateway, group), what="the other bot's message")
        assert [(r["speaker"], r["content"]) for r in rows] == [
            ("Weather", "@gw_bot Weather: 12°C and rain")
        ]
        wait_until(lambda: not telegram.pending_updates(), what="all updates confirmed")
        assert fake_llm.chat_requests() == []
        assert telegram.sent_messages(group) == []

    def test_long_reply_is_split_under_4096_with_code_blocks(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_100_006
        code = "\n".join(f"rows[{i}] = fetch(i) if i < limit else None" for i in range(400))
        prose = "\n\n".join(["Each paragraph explains a little more of the plan. " * 10] * 10)
        fake_llm.reply = lambda body: f"Here you go:\n\n```python\n{code}\n```\n\n{prose}"
        telegram.push_update(retarget(payload("private_text"), chat))
        wait_until(
            lambda: (
                "".join(s["_visible"] for s in telegram.sent_messages(chat)).count("Each paragraph")
                == 100
            ),
            what="the whole long reply",
        )
        sent = telegram.sent_messages(chat)
        assert len(sent) >= 5
        assert len(telegram.calls("sendMessage")) == len(sent), "Telegram refused nothing"
        code_chunks = [s["text"] for s in sent if "<pre>" in s["text"]]
        assert len(code_chunks) >= 3
        assert all(c.count('<pre><code class="language-python">') == 1 for c in code_chunks)
        assert "".join(s["_visible"] for s in sent).count("fetch(i)") == 400

    def test_429_is_honoured_and_the_reply_sent_once(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_100_007
        telegram.fail_next("sendMessage", TelegramFailure.rate_limited(1))
        telegram.push_update(retarget(payload("private_text"), chat))
        (sent,) = sent_to(telegram, chat)
        assert sent["text"].startswith("echo: Hello!")
        attempts = [c for c in telegram.calls("sendMessage") if c.params["chat_id"] == str(chat)]
        assert len(attempts) == 2
        assert attempts[1].at > attempts[0].at

    def test_formatting_refused_falls_back_to_plain_text(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_100_008
        fake_llm.reply = lambda body: "**Status**: all <green> & good"
        telegram.fail_next("sendMessage", TelegramFailure.cant_parse())
        telegram.push_update(retarget(payload("private_text"), chat))
        (sent,) = sent_to(telegram, chat)
        assert "parse_mode" not in sent
        assert sent["text"] == "Status: all <green> & good"

    def test_non_latin_text_round_trips(self, telegram: FakeTelegram, fake_llm: FakeLLM) -> None:
        group = -1_004_100_009
        telegram.push_update(retarget(payload("non_latin"), group))
        (sent,) = sent_to(telegram, group)
        assert sent["_visible"] == "echo: [王芳] Привет 👋🏽 @gw_bot, как дела? 你好"
        assert sent["reply_parameters"]["message_id"] == 330

    def test_commands_are_answered_without_the_model(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        group, chat = -1_004_100_010, 4_100_010
        telegram.push_update(retarget(payload("group_command"), group))
        telegram.push_update(retarget(payload("private_start"), chat))
        (usage,) = sent_to(telegram, group)
        (start,) = sent_to(telegram, chat)
        assert "Context" in usage["_visible"]
        assert "/new" in start["_visible"]
        assert fake_llm.chat_requests() == []


class TestSettings:
    def test_allowlist_and_trigger_mode_all(
        self, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
    ) -> None:
        group, stranger = -1_004_200_001, 4_200_002
        gateway = start_gateway(
            sqlite_url,
            tmp_path,
            fake_llm,
            telegram,
            trigger_mode="all",
            allow_chats=str(group),
        )
        try:
            telegram.push_update(retarget(payload("private_text"), stranger))
            telegram.push_update(retarget(payload("group_unaddressed"), group))
            (sent,) = sent_to(telegram, group)
            assert sent["_visible"].startswith("echo: [Ann Lee] Deploy is done")
            wait_until(lambda: not telegram.pending_updates(), what="all updates confirmed")
            assert stored(gateway, stranger) == []
            assert telegram.sent_messages(stranger) == []
        finally:
            gateway.stop()

    def test_public_url_without_secret_refuses_webhook_mode(
        self,
        sqlite_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        telegram: FakeTelegram,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        with caplog.at_level(logging.ERROR):
            gateway = start_gateway(sqlite_url, tmp_path, fake_llm, telegram, public_url=PUBLIC_URL)
        try:
            response = httpx.post(
                f"{gateway.base_url}/webhooks/telegram/default",
                json=payload("private_text"),
                headers={"X-Telegram-Bot-Api-Secret-Token": "anything"},
            )
            assert response.status_code == 404
            assert "HUBBUB_TELEGRAM_WEBHOOK_SECRET" in caplog.text
            assert telegram.calls("setWebhook") == []
            assert telegram.calls("getUpdates") == []
        finally:
            gateway.stop()


@pytest.fixture(scope="module")
def _webhook(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, _llm_server: FakeLLM
) -> Iterator[tuple[GatewayServer, FakeTelegram, dict[str, Any]]]:
    home = tmp_path_factory.mktemp("telegram-webhook")
    shutil.copy(sqlite_template, home / "hubbub.db")
    with TelegramServerThread() as fake:
        gateway = start_gateway(
            f"sqlite:///{home / 'hubbub.db'}",
            home,
            _llm_server,
            fake,
            public_url=PUBLIC_URL,
            telegram_webhook_secret=SECRET,
        )
        wait_until(lambda: fake.calls("setMyCommands"), what="webhook registration")
        (registration,) = fake.calls("setWebhook")
        yield gateway, fake, registration.params
        gateway.stop()


class TestWebhook:
    """One webhook gateway; updates are posted to it as Telegram would."""

    @pytest.fixture
    def telegram(
        self, _webhook: tuple[GatewayServer, FakeTelegram, dict[str, Any]]
    ) -> Iterator[FakeTelegram]:
        self.gateway, fake, self.registration = _webhook
        fake.reset()
        with httpx.Client(base_url=self.gateway.base_url, timeout=30) as client:
            self.client = client
            yield fake

    def post(self, update: dict[str, Any], secret: str | None = SECRET) -> httpx.Response:
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
        return self.client.post("/webhooks/telegram/default", json=update, headers=headers)

    def test_the_webhook_was_registered_with_its_secret(self, telegram: FakeTelegram) -> None:
        assert self.registration["url"] == f"{PUBLIC_URL}/webhooks/telegram/default"
        assert self.registration["secret_token"] == SECRET
        assert self.registration["allowed_updates"] == ["message", "edited_message"]
        assert telegram.calls("getUpdates") == [], "no polling in webhook mode"

    @pytest.mark.parametrize("secret", [None, "wrong", SECRET.upper()])
    def test_missing_or_wrong_secret_is_403_and_nothing_is_stored(
        self, telegram: FakeTelegram, fake_llm: FakeLLM, secret: str | None
    ) -> None:
        chat = 4_300_001
        response = self.post(retarget(payload("private_text"), chat) | {"update_id": 1}, secret)
        assert response.status_code == 403
        assert stored(self.gateway, chat) == []
        assert fake_llm.chat_requests() == []

    def test_a_verified_update_is_answered_and_a_retry_gives_no_second_reply(
        self, telegram: FakeTelegram, fake_llm: FakeLLM
    ) -> None:
        chat = 4_300_002
        update = retarget(payload("private_text"), chat) | {"update_id": 700_000_001}
        first = self.post(update)
        assert first.status_code == 200
        (sent,) = sent_to(telegram, chat)
        assert sent["text"].startswith("echo: Hello!")
        assert self.post(update).status_code == 200
        update_copy = retarget(payload("private_text"), chat) | {"update_id": 700_000_002}
        assert self.post(update_copy).status_code == 200, "same message, new update id"
        follow_up = retarget(payload("private_text"), chat) | {"update_id": 700_000_003}
        follow_up["message"] |= {"message_id": 1400, "text": "next"}
        self.post(follow_up)
        both = sent_to(telegram, chat, 2)
        assert [s["text"] for s in both] == [sent["text"], "echo: next"]
        assert len([r for r in stored(self.gateway, chat) if r["role"] == "user"]) == 2
        assert len(fake_llm.chat_requests()) == 2

    def test_an_edit_through_the_webhook_updates_the_transcript(
        self, telegram: FakeTelegram
    ) -> None:
        group = -1_004_300_003
        self.post(retarget(payload("group_unaddressed"), group) | {"update_id": 700_000_010})
        wait_until(lambda: stored(self.gateway, group), what="the message")
        edit = retarget(payload("edited_message"), group) | {"update_id": 700_000_011}
        edit["edited_message"]["message_id"] = 301
        assert self.post(edit).status_code == 200
        (row,) = stored(self.gateway, group)
        assert row["edited"] is True
        assert "disk alerts" in row["content"]

    def test_bad_bodies_are_400(self, telegram: FakeTelegram) -> None:
        response = self.client.post(
            "/webhooks/telegram/default",
            content=b"{oops",
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET, "content-type": "application/json"},
        )
        assert response.status_code == 400


def test_end_to_end_on_postgres(
    postgres_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(
        db_url=postgres_url,
        home=tmp_path,
        fake=fake_llm,
        telegram_token=TOKEN,
        telegram_api_base=telegram.api_base,
    )
    gateway_factory(settings_from_env(env))
    chat = 4_400_001
    telegram.push_update(retarget(payload("private_text"), chat))
    (sent,) = sent_to(telegram, chat)
    assert sent["text"] == "echo: Hello! Can you summarise RFC 9110 in three bullets?"
