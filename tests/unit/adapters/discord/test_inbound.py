"""Real-format Discord payloads, parsed by discord.py, become the right InboundMessage."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.base import BotConfig
from adapters.discord.channels import locate
from adapters.discord.inbound import (
    Location,
    Me,
    RecentIds,
    bot_role_id,
    deletion,
    is_addressed,
    relocated,
    to_inbound,
)
from adapters.messages import InboundMessage
from tests.fixtures.platform_servers.discord import (
    ANN_ID,
    BOB_ID,
    BOT_ID,
    BOT_ROLE_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    OTHER_BOT_ID,
    THREAD_ID,
    TOKEN,
    load_payload,
)
from tests.unit.adapters.discord.conftest import Parsed

CONFIG = BotConfig(platform="discord", bot_name="helper", tenant_id="acme", token=TOKEN)
GENERAL = Location(chat_id=GENERAL_ID, chat_type="group", guild_id=GUILD_ID)


def convert(parsed: Parsed, payload: dict[str, Any] | str, **kwargs: Any) -> InboundMessage | None:
    message = parsed.message(payload)
    location = locate(message.channel)
    assert location is not None
    return to_inbound(message, config=CONFIG, me=parsed.me, location=location, **kwargs)


def converted(parsed: Parsed, payload: dict[str, Any] | str, **kwargs: Any) -> InboundMessage:
    inbound = convert(parsed, payload, **kwargs)
    assert inbound is not None
    return inbound


class TestChats:
    def test_unaddressed_group_message_is_kept_as_context(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_group")
        assert inbound.platform == "discord"
        assert (inbound.bot_name, inbound.tenant_id) == ("helper", "acme")
        assert (inbound.chat_id, inbound.chat_type, inbound.thread_id) == (GENERAL_ID, "group", "")
        assert inbound.message_id == "1311000000000000001"
        assert (inbound.sender_id, inbound.sender_name) == (ANN_ID, "Ann Lee")
        assert inbound.addressed is False
        assert inbound.command is None
        assert inbound.sender_is_bot is False
        assert inbound.event == "message"
        assert inbound.text.startswith("morning all, the deploy moved")
        assert inbound.meta == {"channel_id": GENERAL_ID, "guild_id": GUILD_ID}

    def test_thread_is_its_own_session_under_its_parent_channel(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_thread")
        assert (inbound.chat_id, inbound.thread_id, inbound.chat_type) == (
            GENERAL_ID,
            THREAD_ID,
            "group",
        )
        assert inbound.meta["channel_id"] == THREAD_ID
        assert inbound.addressed is True

    def test_dm_is_private_and_always_addressed(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_private")
        assert (inbound.chat_id, inbound.chat_type, inbound.thread_id) == (DM_ID, "private", "")
        assert inbound.addressed is True
        assert "guild_id" not in inbound.meta

    def test_non_latin_text_and_nickname_survive(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_non_latin")
        expected = "@hubbub 明日のデプロイは何時ですか？ Привет, всё готово? 🚀"  # noqa: RUF001
        assert inbound.text == expected
        assert inbound.sender_name == "ゆきさん"
        assert inbound.addressed is True


class TestAddressing:
    def test_user_mention(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_mention")
        assert inbound.addressed is True
        assert inbound.text == "@hubbub when is the deploy now?", "mentions are shown by name"

    def test_mention_of_the_bots_managed_role(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_role_mention")
        assert inbound.addressed is True
        assert inbound.text.startswith("@Hubbub can you summarise")

    def test_reply_to_the_bot(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_reply_to_bot")
        assert inbound.addressed is True
        assert inbound.reply_to_message_id == "1311000000000000900"

    def test_reply_to_a_person_is_not_addressed(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_reply_to_person")
        assert inbound.addressed is False
        assert inbound.reply_to_message_id == "1311000000000000001"

    def test_reply_to_a_deleted_bot_message_is_recognised_from_memory(self, parsed: Parsed) -> None:
        payload = load_payload("message_create_reply_to_bot")
        payload["referenced_message"] = None
        payload["mentions"] = []
        message = parsed.message(payload)
        bot_message_id = int(payload["message_reference"]["message_id"])
        assert not is_addressed(message, Me(int(BOT_ID)), GENERAL)
        remembered = RecentIds(8)
        remembered.add(bot_message_id)
        assert is_addressed(message, Me(int(BOT_ID), own_message_ids=remembered), GENERAL)

    def test_everyone_mention_does_not_address_the_bot(self, parsed: Parsed) -> None:
        payload = load_payload("message_create_group")
        payload["content"] = "@everyone standup in 5"
        payload["mention_everyone"] = True
        assert converted(parsed, payload).addressed is False

    def test_forwarded_bot_message_is_not_a_reply(self, parsed: Parsed) -> None:
        payload = load_payload("message_create_reply_to_bot")
        payload["type"] = 0
        payload["message_reference"]["type"] = 1
        payload["mentions"] = []
        inbound = converted(parsed, payload)
        assert inbound.addressed is False
        assert inbound.reply_to_message_id is None

    def test_bot_role_lookup(self, parsed: Parsed) -> None:
        guild = parsed.client.get_guild(int(GUILD_ID))
        assert bot_role_id(guild, int(BOT_ID)) == int(BOT_ROLE_ID)
        assert bot_role_id(guild, int(BOB_ID)) is None
        assert bot_role_id(None, int(BOT_ID)) is None


class TestCommands:
    def test_plain_text_command(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_command")
        assert (inbound.command, inbound.command_args) == ("compress", "the auth bug")
        assert inbound.text == "/compress the auth bug"

    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (f"<@{BOT_ID}> /new", ("new", "")),
            (f"<@!{BOT_ID}>   /usage", ("usage", "")),
            (f"<@&{BOT_ROLE_ID}> /compact keep the ids", ("compact", "keep the ids")),
            (f"<@{BOB_ID}> /new", None),
            ("please /new", None),
            ("/HELP", ("help", "")),
        ],
    )
    def test_command_after_a_mention_of_the_bot(
        self, parsed: Parsed, content: str, expected: tuple[str, str] | None
    ) -> None:
        payload = load_payload("message_create_group")
        payload["content"] = content
        inbound = converted(parsed, payload)
        got = (inbound.command, inbound.command_args) if inbound.command else None
        assert got == expected


class TestNotForUs:
    def test_own_messages_are_never_converted(self, parsed: Parsed) -> None:
        assert convert(parsed, "message_create_own") is None

    def test_system_messages_are_skipped(self, parsed: Parsed) -> None:
        assert convert(parsed, "message_create_system") is None

    def test_other_bots_are_marked(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_create_bot_author")
        assert inbound.sender_is_bot is True
        assert inbound.sender_id == OTHER_BOT_ID
        assert inbound.addressed is True, "gating other bots is the intake's job"

    def test_another_bots_command_output_is_context(self, parsed: Parsed) -> None:
        payload = load_payload("message_create_bot_author")
        payload["type"] = 20
        payload["content"] = "It is 21°C in Berlin."
        payload["mentions"] = []
        inbound = converted(parsed, payload)
        assert (inbound.sender_is_bot, inbound.addressed) == (True, False)

    def test_attachment_only_message_is_described(self, parsed: Parsed) -> None:
        assert converted(parsed, "message_create_attachment").text == "[attachment: error-log.txt]"

    def test_message_with_nothing_to_read_is_skipped(self, parsed: Parsed) -> None:
        payload = load_payload("message_create_group")
        payload["content"] = "   "
        assert convert(parsed, payload) is None


class TestEditsAndDeletes:
    def test_edit_carries_the_new_text_under_the_same_id(self, parsed: Parsed) -> None:
        inbound = converted(parsed, "message_update", event="edit")
        assert inbound.event == "edit"
        assert inbound.message_id == "1311000000000000001"
        assert "11:00 (not 10:30)" in inbound.text

    def test_delete_needs_only_the_id(self) -> None:
        inbound = deletion(
            1311000000000000001, config=CONFIG, location=GENERAL, channel_id=int(GENERAL_ID)
        )
        assert inbound.event == "delete"
        assert inbound.message_id == "1311000000000000001"
        assert (inbound.text, inbound.sender_id) == ("", None)


def test_relocated_moves_a_message_into_its_thread(parsed: Parsed) -> None:
    inbound = converted(parsed, "message_create_group")
    moved = relocated(
        inbound, Location(chat_id=GENERAL_ID, chat_type="group", thread_id="42", guild_id=GUILD_ID)
    )
    assert (moved.chat_id, moved.thread_id) == (GENERAL_ID, "42")
    assert moved.text == inbound.text
    assert moved.meta["channel_id"] == GENERAL_ID


def test_recent_ids_forget_the_oldest() -> None:
    ids = RecentIds(3)
    for value in (1, 2, 3, 3, 4):
        ids.add(value)
    assert 1 not in ids
    assert all(value in ids for value in (2, 3, 4))


class TestImages:
    @staticmethod
    def with_image(content: str) -> dict[str, Any]:
        payload = load_payload("message_create_attachment")
        payload["content"] = content
        payload["attachments"] = [
            *payload["attachments"],
            {
                "id": "1311000000000009002",
                "filename": "graph.png",
                "size": 4096,
                "url": "https://cdn.discordapp.com/attachments/1/3/graph.png?ex=1&is=2&hm=3",
                "proxy_url": "https://media.discordapp.net/attachments/1/3/graph.png",
                "content_type": "image/png",
                "width": 800,
                "height": 600,
            },
        ]
        return payload

    def test_image_attachments_travel_as_images_and_other_files_by_name(
        self, parsed: Parsed
    ) -> None:
        inbound = converted(parsed, self.with_image("see the graph"))
        assert inbound.text == "see the graph\n[attachment: error-log.txt]"
        (image,) = inbound.images
        assert image.ref.startswith("https://cdn.discordapp.com/attachments/1/3/graph.png?")
        assert (image.filename, image.size, image.width, image.height) == (
            "graph.png",
            4096,
            800,
            600,
        )

    def test_an_image_alone_is_a_message(self, parsed: Parsed) -> None:
        payload = self.with_image("")
        payload["attachments"] = payload["attachments"][1:]
        inbound = converted(parsed, payload)
        assert (inbound.text, len(inbound.images)) == ("", 1)

    def test_an_edit_carries_no_images(self, parsed: Parsed) -> None:
        inbound = converted(parsed, self.with_image("see the graph"), event="edit")
        assert inbound.images == ()
