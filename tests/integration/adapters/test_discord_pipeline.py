"""End to end through the real gateway: a Discord event in, one reply out to the local Discord.

The gateway starts the Discord listener from ``HUBBUB_DISCORD_TOKEN`` and
``HUBBUB_DISCORD_API_BASE``; the turn runs against the fake provider through litellm; the
reply is delivered by the Discord deliverer to the fake's REST API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_core.db.models import ChatSession, Message, OutboxEntry
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.platform_servers.discord import (
    DM_ID,
    GENERAL_ID,
    THREAD_ID,
    Failure,
    FakeDiscord,
    SentMessage,
    load_payload,
)
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

NON_LATIN_ECHO = "echo: [ゆきさん] @hubbub 明日のデプロイは何時ですか？ Привет, всё готово? 🚀"  # noqa: RUF001


@dataclass(frozen=True)
class Line:
    """A stored transcript line."""

    role: str
    speaker: str | None
    content: str | None
    platform_id: str | None
    deleted: bool


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake: FakeDiscord,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        discord_token=fake.token,
        discord_api_base=fake.base_url,
    )
    server = gateway_factory(settings_from_env(env))
    wait_until(fake.connected, timeout=20, what="the gateway's Discord connection")
    return server


def transcript(gateway: GatewayServer, chat_id: str, thread_id: str = "") -> list[Line]:
    with gateway.runtime.factory() as db:
        session = db.scalar(
            select(ChatSession).where(
                ChatSession.platform == "discord",
                ChatSession.chat_id == chat_id,
                ChatSession.thread_id == thread_id,
                ChatSession.is_current.is_(True),
            )
        )
        if session is None:
            return []
        rows = db.scalars(
            select(Message).where(Message.session_id == session.id).order_by(Message.seq)
        )
        return [
            Line(r.role, r.speaker_name, r.content, r.platform_message_id, r.deleted) for r in rows
        ]


def all_sent_out(gateway: GatewayServer) -> bool:
    """Every queued reply has been delivered (so nothing more can arrive)."""
    with gateway.runtime.factory() as db:
        states = list(db.scalars(select(OutboxEntry.state)))
    return bool(states) and all(state == "sent" for state in states)


def wait_replies(fake: FakeDiscord, channel_id: str, n: int) -> list[SentMessage]:
    found: list[SentMessage] = wait_until(
        lambda: len(sent := fake.sent_messages(channel_id)) >= n and sent,
        timeout=20,
        what=f"{n} replies in {channel_id}",
    )
    return found


def wait_lines(gateway: GatewayServer, chat_id: str, n: int, thread_id: str = "") -> list[Line]:
    found: list[Line] = wait_until(
        lambda: len(lines := transcript(gateway, chat_id, thread_id)) >= n and lines,
        timeout=20,
        what=f"{n} stored lines in {chat_id}/{thread_id}",
    )
    return found


def user_contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


class TestGroupChannel:
    def test_context_is_recorded_and_a_mention_gets_exactly_one_reply(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        context = load_payload("message_create_group")
        mention = load_payload("message_create_mention")
        fake.push("MESSAGE_CREATE", context)
        wait_lines(gateway, GENERAL_ID, 1)
        assert fake_llm.chat_requests() == [], "unaddressed group chatter costs no model call"
        fake.fail_next(Failure.rate_limited(0.05))
        fake.push("MESSAGE_CREATE", mention)
        (sent,) = wait_replies(fake, GENERAL_ID, 1)
        wait_until(lambda: all_sent_out(gateway), what="the outbox to settle")
        assert len(fake.sent_messages()) == 1, "a 429 is waited out, never sent twice"
        assert sent.content == "echo: [Bob] @hubbub when is the deploy now?"
        assert sent.reference_id == mention["id"]
        assert sent.body["allowed_mentions"] == {"parse": [], "replied_user": True}
        (request,) = fake_llm.chat_requests()
        assert user_contents(request) == [
            f"[Ann Lee] {context['content']}",
            "[Bob] @hubbub when is the deploy now?",
        ]
        assert fake.typing == [GENERAL_ID]
        lines = wait_lines(gateway, GENERAL_ID, 3)
        assert [(line.role, line.speaker, line.platform_id) for line in lines] == [
            ("user", "Ann Lee", context["id"]),
            ("user", "Bob", mention["id"]),
            ("assistant", None, None),
        ], "the bot's own message, echoed by the gateway, is not stored again"

    def test_a_replayed_event_is_answered_once(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        mention = load_payload("message_create_mention")
        fake.push("MESSAGE_CREATE", mention)
        wait_replies(fake, GENERAL_ID, 1)
        fake.push("MESSAGE_CREATE", mention)  # as after a RESUME that replays it
        later = load_payload("message_create_group")
        fake.push("MESSAGE_CREATE", later)
        wait_until(
            lambda: any(
                line.platform_id == later["id"] for line in transcript(gateway, GENERAL_ID)
            ),
            what="the message after the replay",
        )
        wait_until(lambda: all_sent_out(gateway), what="the outbox to settle")
        assert len(fake.sent_messages()) == 1
        assert len(fake_llm.chat_requests()) == 1

    def test_other_bots_are_recorded_but_not_answered(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        fake.push("MESSAGE_CREATE", load_payload("message_create_bot_author"))
        fake.push("MESSAGE_CREATE", load_payload("message_create_non_latin"))
        (sent,) = wait_replies(fake, GENERAL_ID, 1)
        assert sent.content == NON_LATIN_ECHO
        (request,) = fake_llm.chat_requests()
        assert user_contents(request)[0] == "[otherbot] @hubbub status report: all green"

    def test_edits_and_deletes_update_the_transcript(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        fake.push("MESSAGE_CREATE", load_payload("message_create_group"))
        fake.push("MESSAGE_CREATE", load_payload("message_create_reply_to_person"))
        wait_lines(gateway, GENERAL_ID, 2)
        fake.push("MESSAGE_UPDATE", load_payload("message_update"))
        wait_until(
            lambda: "11:00" in str(transcript(gateway, GENERAL_ID)[0].content), what="the edit"
        )
        fake.push("MESSAGE_DELETE", {**load_payload("message_delete"), "id": "1311000000000000005"})
        lines = wait_until(
            lambda: (t := transcript(gateway, GENERAL_ID))[1].deleted and t, what="the delete"
        )
        assert not lines[0].deleted
        fake.push("MESSAGE_CREATE", load_payload("message_create_mention"))
        wait_replies(fake, GENERAL_ID, 1)
        (request,) = fake_llm.chat_requests()
        assert user_contents(request) == [
            "[Ann Lee] " + load_payload("message_update")["content"],
            "[Bob] @hubbub when is the deploy now?",
        ]


class TestSessions:
    def test_thread_and_dm_are_sessions_of_their_own(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        fake.push("MESSAGE_CREATE", load_payload("message_create_mention"))
        wait_replies(fake, GENERAL_ID, 1)
        thread = load_payload("message_create_thread")
        fake.push("MESSAGE_CREATE", thread)
        (in_thread,) = wait_replies(fake, THREAD_ID, 1)
        assert in_thread.reference_id == thread["id"]
        fake.push("MESSAGE_CREATE", load_payload("message_create_private"))
        (in_dm,) = wait_replies(fake, DM_ID, 1)
        assert in_dm.reference_id is None, "DM replies do not quote"
        assert in_dm.content == "echo: hi! can you explain what a migration lock is?"
        _first, second, third = fake_llm.chat_requests()
        assert len(user_contents(second)) == 1, "the thread does not see the channel"
        assert len(user_contents(third)) == 1, "the DM sees neither"
        assert len(wait_lines(gateway, GENERAL_ID, 2, thread_id=THREAD_ID)) == 2


class TestSlashCommands:
    def test_usage_is_acknowledged_and_answered_once_in_the_channel(
        self, gateway: GatewayServer, fake: FakeDiscord, fake_llm: FakeLLM
    ) -> None:
        interaction = load_payload("interaction_create_compress")
        interaction["data"] = {"id": "1312000000000000001", "name": "usage", "type": 1}
        fake.push("INTERACTION_CREATE", interaction)
        (answer,) = wait_replies(fake, GENERAL_ID, 1)
        wait_until(lambda: all_sent_out(gateway), what="the outbox to settle")
        assert len(fake.sent_messages()) == 1
        (ack,) = fake.interaction_callbacks
        assert ack["data"]["content"] == "Working on `/usage`\u2026"
        assert answer.content.startswith("Context:")
        assert answer.reference_id is None
        assert fake_llm.chat_requests() == [], "commands are answered without the model"
        (line, reply) = wait_lines(gateway, GENERAL_ID, 2)
        assert (line.content, line.platform_id) == ("/usage", f"interaction:{interaction['id']}")
        assert reply.role == "assistant"
