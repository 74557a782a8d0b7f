"""The Slack event normaliser on real-format payloads (names come from a primed cache)."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import BotConfig
from adapters.messages import InboundMessage
from adapters.slack.events import EventNormaliser, chat_type_of
from adapters.slack.identity import BotIdentity
from adapters.slack.threads import ThreadTracker
from adapters.slack.users import SlackUser, UserDirectory
from tests.fixtures.platform_servers.slack import (
    BOT_ID,
    BOT_NAME,
    BOT_USER_ID,
    DEFAULT_USERS,
    TEAM_ID,
    load_payload,
)

pytestmark = pytest.mark.anyio

IDENTITY = BotIdentity(user_id=BOT_USER_ID, bot_id=BOT_ID, team_id=TEAM_ID, name=BOT_NAME)
UNREACHABLE = "http://127.0.0.1:9/api/"
"""Nothing listens here: a lookup that was not primed shows up as a name equal to the id."""


def _normaliser(**config: Any) -> tuple[EventNormaliser, ThreadTracker]:
    users = UserDirectory(AsyncWebClient(base_url=UNREACHABLE, retry_handlers=[]))
    for user_id, data in DEFAULT_USERS.items():
        name = data.get("display_name") or data["real_name"]
        users.remember(SlackUser(user_id, name, is_bot=bool(data.get("is_bot"))))
    threads = ThreadTracker()
    bot = BotConfig(platform="slack", token="xoxb-test", **config)
    return EventNormaliser(bot, users, threads), threads


async def _event(name: str, **config: Any) -> InboundMessage | None:
    normaliser, _ = _normaliser(**config)
    return await normaliser.from_event(load_payload(name)["event"], IDENTITY)


class TestMessages:
    async def test_dm_is_private_and_addressed(self) -> None:
        inbound = await _event("message_im")
        assert inbound is not None
        assert (inbound.chat_type, inbound.chat_id, inbound.thread_id) == (
            "private",
            "D0ALICE01",
            "",
        )
        assert inbound.addressed
        assert inbound.message_id == "D0ALICE01:1732799000.000100"
        assert (inbound.sender_id, inbound.sender_name, inbound.sender_is_bot) == (
            "U0ALICE",
            "Alice",
            False,
        )
        assert inbound.text == "Hi! Can you summarise what changed in the deploy process?"
        assert inbound.reply_to_message_id is None

    async def test_unaddressed_channel_message_is_kept_for_context(self) -> None:
        inbound = await _event("message_channel")
        assert inbound is not None
        assert inbound.chat_type == "group"
        assert not inbound.addressed
        assert inbound.sender_name == "Carol Chen"

    @pytest.mark.parametrize("name", ["app_mention", "message_mention"])
    async def test_mention_addresses_the_bot_and_is_stripped(self, name: str) -> None:
        inbound = await _event(name)
        assert inbound is not None
        assert inbound.addressed
        assert inbound.chat_type == "group"
        assert inbound.text == "what did we decide about the deploy?"
        assert inbound.message_id == "C0GENERAL:1732799200.000300"

    async def test_app_mention_and_message_are_the_same_message(self) -> None:
        mention, message = await _event("app_mention"), await _event("message_mention")
        assert mention is not None
        assert message is not None
        assert mention.model_dump(exclude={"received_at"}) == message.model_dump(
            exclude={"received_at"}
        )

    async def test_thread_reply_is_its_own_session_and_refers_to_the_parent(self) -> None:
        inbound = await _event("message_thread")
        assert inbound is not None
        assert inbound.thread_id == "1732799300.000400"
        assert inbound.reply_to_message_id == "C0GENERAL:1732799300.000400"
        assert not inbound.addressed

    async def test_thread_under_a_bot_message_addresses_it(self) -> None:
        inbound = await _event("message_thread_to_bot")
        assert inbound is not None
        assert inbound.addressed

    async def test_thread_the_bot_posted_in_addresses_it(self) -> None:
        normaliser, _ = _normaliser()
        own = load_payload("own_message")["event"]
        assert await normaliser.from_event(own, IDENTITY) is None
        follow_up = load_payload("message_thread")["event"] | {"thread_ts": own["thread_ts"]}
        inbound = await normaliser.from_event(follow_up, IDENTITY)
        assert inbound is not None
        assert inbound.addressed

    async def test_own_message_never_comes_in(self) -> None:
        assert await _event("own_message") is None
        event = load_payload("own_message")["event"]
        by_bot_id_only = {k: v for k, v in event.items() if k != "user"}
        normaliser, _ = _normaliser()
        assert await normaliser.from_event(by_bot_id_only, IDENTITY) is None

    async def test_other_bot_is_marked(self) -> None:
        inbound = await _event("bot_message")
        assert inbound is not None
        assert inbound.sender_is_bot
        assert (inbound.sender_id, inbound.sender_name) == ("B0DEPLOY", "Deploy Bot")
        assert inbound.text == (
            "Deploy #482 finished: build 482 (https://ci.example.com/builds/482) is live on "
            "prod & staging"
        )

    async def test_attachment_only_post_reads_as_its_fallback(self) -> None:
        inbound = await _event("bot_message_attachment")
        assert inbound is not None
        assert inbound.text == "[FIRING:1] HighErrorRate api-gateway (5xx > 2% for 10m)"
        assert (inbound.sender_name, inbound.sender_is_bot) == ("alerts", True)

    async def test_command_after_mention(self) -> None:
        inbound = await _event("message_command")
        assert inbound is not None
        assert (inbound.command, inbound.command_args) == ("compress", "deploy plan")
        assert inbound.text == "/compress deploy plan"

    async def test_unknown_command_is_handed_on_as_a_command(self) -> None:
        # Intake answers it with "unknown command" and the list; the model never sees it.
        normaliser, _ = _normaliser()
        event = load_payload("message_command")["event"] | {"text": "<@U0HUBBUB> /deploy now"}
        inbound = await normaliser.from_event(event, IDENTITY)
        assert inbound is not None
        assert (inbound.command, inbound.command_args) == ("deploy", "now")
        assert inbound.text == "/deploy now"

    async def test_non_latin_text_and_escapes(self) -> None:
        inbound = await _event("message_non_latin")
        assert inbound is not None
        assert inbound.sender_name == "Борис"
        assert (
            inbound.text == "Привет! Деплой перенесли на завтра? 明日の<リリース>は大丈夫ですか 🚀"
        )
        assert inbound.addressed

    async def test_mentions_of_people_read_as_names(self) -> None:
        inbound = await _event("message_private_channel")
        assert inbound is not None
        assert inbound.chat_type == "group"
        assert inbound.text == "Reminder: @Alice owns the rollback, see #general and @here"

    async def test_file_share_without_text(self) -> None:
        inbound = await _event("message_file_share")
        assert inbound is not None
        assert inbound.text == "[file: deploy.log]"
        assert inbound.images == ()

    async def test_shared_images_travel_as_images_fetched_from_url_private(self) -> None:
        normaliser, _ = _normaliser()
        event = dict(load_payload("message_file_share")["event"])
        url = "https://files.slack.com/files-pri/T0TEAM01-F0IMG01/graph.png"
        event["files"] = [
            *event["files"],
            {
                "id": "F0IMG01",
                "name": "graph.png",
                "mimetype": "image/png",
                "size": 4096,
                "original_w": 800,
                "original_h": 600,
                "url_private": url,
            },
            {"id": "F0HIDDEN", "mode": "hidden_by_limit", "mimetype": "image/png"},
        ]
        inbound = await normaliser.from_event(event, IDENTITY)
        assert inbound is not None
        (image,) = inbound.images
        assert (image.ref, image.filename, image.size, image.width, image.height) == (
            url,
            "graph.png",
            4096,
            800,
            600,
        )
        assert inbound.text == "[file: deploy.log]\n[file: file]", "a hidden file has no URL"

    @pytest.mark.parametrize("name", ["message_channel_join", "reaction_added"])
    async def test_other_events_are_ignored(self, name: str) -> None:
        assert await _event(name) is None


class TestEditsAndDeletes:
    async def test_edit(self) -> None:
        inbound = await _event("message_changed")
        assert inbound is not None
        assert inbound.event == "edit"
        assert inbound.message_id == "C0GENERAL:1732799100.000200"
        assert inbound.text == "The staging deploy is green again, we can ship after 3pm."

    async def test_change_without_new_text_is_not_an_edit(self) -> None:
        normaliser, _ = _normaliser()
        event = load_payload("message_changed")["event"]
        event["message"]["text"] = event["previous_message"]["text"]
        assert await normaliser.from_event(event, IDENTITY) is None

    async def test_delete(self) -> None:
        inbound = await _event("message_deleted")
        assert inbound is not None
        assert (inbound.event, inbound.message_id, inbound.text) == (
            "delete",
            "C0GENERAL:1732799100.000200",
            "",
        )

    async def test_own_edits_and_deletes_are_ignored(self) -> None:
        normaliser, _ = _normaliser()
        edit = load_payload("message_changed")["event"]
        edit["message"]["user"] = BOT_USER_ID
        delete = load_payload("message_deleted")["event"]
        delete["previous_message"]["user"] = BOT_USER_ID
        assert await normaliser.from_event(edit, IDENTITY) is None
        assert await normaliser.from_event(delete, IDENTITY) is None


class TestAllowlists:
    async def test_sender_outside_allowlist_is_dropped(self) -> None:
        assert await _event("message_channel", allow_users=frozenset({"U0ALICE"})) is None
        assert await _event("message_im", allow_users=frozenset({"U0ALICE"})) is not None

    async def test_chat_outside_allowlist_is_dropped(self) -> None:
        assert await _event("message_channel", allow_chats=frozenset({"D0ALICE01"})) is None
        assert await _event("message_im", allow_chats=frozenset({"D0ALICE01"})) is not None


class TestSlashCommands:
    async def test_known_command(self) -> None:
        normaliser, _ = _normaliser()
        inbound = await normaliser.from_command(load_payload("slash_command"))
        assert inbound is not None
        assert (inbound.command, inbound.command_args, inbound.text) == (
            "compress",
            "deploy plan",
            "/compress deploy plan",
        )
        assert inbound.addressed
        assert inbound.chat_type == "group"
        assert inbound.thread_id == ""
        assert inbound.message_id == "C0GENERAL:cmd:13345224609.738474920.8088930838d88f008e0"
        assert inbound.sender_name == "Alice"

    async def test_umbrella_command(self) -> None:
        normaliser, _ = _normaliser()
        payload = load_payload("slash_command") | {"command": "/hubbub", "text": "usage"}
        inbound = await normaliser.from_command(payload)
        assert inbound is not None
        assert (inbound.command, inbound.text) == ("usage", "/usage")

    @pytest.mark.parametrize(
        ("command", "text", "spoken"),
        [("/model", "openai/gpt-4o", "/model openai/gpt-4o"), ("/stop", "", "/stop")],
    )
    async def test_model_and_stop_are_commands(self, command: str, text: str, spoken: str) -> None:
        normaliser, _ = _normaliser()
        payload = load_payload("slash_command") | {"command": command, "text": text}
        inbound = await normaliser.from_command(payload)
        assert inbound is not None
        assert (inbound.command, inbound.text) == (command.lstrip("/"), spoken)

    async def test_umbrella_command_with_a_question(self) -> None:
        normaliser, _ = _normaliser()
        payload = load_payload("slash_command") | {"command": "/hubbub", "text": "what's new?"}
        inbound = await normaliser.from_command(payload)
        assert inbound is not None
        assert (inbound.command, inbound.text, inbound.addressed) == (None, "what's new?", True)

    async def test_command_in_dm(self) -> None:
        normaliser, _ = _normaliser()
        payload = load_payload("slash_command") | {
            "channel_id": "D0ALICE01",
            "channel_name": "directmessage",
            "command": "/new",
            "text": "",
        }
        inbound = await normaliser.from_command(payload)
        assert inbound is not None
        assert (inbound.chat_type, inbound.text) == ("private", "/new")


def test_chat_types() -> None:
    assert chat_type_of("D1", "im") == "private"
    assert chat_type_of("C1", "channel") == "group"
    assert chat_type_of("G1", "group") == "group"
    assert chat_type_of("G1", "mpim") == "group"
    assert chat_type_of("D1", None) == "private"
    assert chat_type_of("C1", None) == "group"
