"""Real-format Telegram updates, parsed by PTB, turned into InboundMessage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update

from adapters.base import BotConfig
from adapters.messages import InboundMessage
from adapters.telegram.inbound import BotIdentity, to_inbound
from tests.fixtures.platform_servers.telegram import BOT_ID, BOT_USERNAME, TOKEN
from workers.intake import should_trigger

PAYLOADS = Path(__file__).resolve().parents[3] / "fixtures" / "payloads" / "telegram"
IDENTITY = BotIdentity(id=BOT_ID, username=BOT_USERNAME)
CONFIG = BotConfig(platform="telegram", bot_name="default", token=TOKEN)
SUPERGROUP = "-1009876543210"
FORUM = "-1001234567890"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def parse(name: str, config: BotConfig = CONFIG) -> InboundMessage | None:
    update = Update.de_json(load(name), Bot(TOKEN, base_url="http://127.0.0.1:9/bot"))
    return to_inbound(update, IDENTITY, config)


def parsed(name: str) -> InboundMessage:
    inbound = parse(name)
    assert inbound is not None, name
    return inbound


def test_every_payload_fixture_is_a_real_update() -> None:
    names = sorted(p.stem for p in PAYLOADS.glob("*.json"))
    assert len(names) >= 20
    for name in names:
        update = Update.de_json(load(name), None)
        assert update.update_id == load(name)["update_id"]


class TestPrivateChats:
    def test_a_dm_is_addressed_and_keyed_by_chat(self) -> None:
        inbound = parsed("private_text")
        assert inbound.platform == "telegram"
        assert inbound.chat_type == "private"
        assert inbound.chat_id == "111111111"
        assert inbound.thread_id == ""
        assert inbound.message_id == "111111111:1365"
        assert inbound.sender_id == "111111111"
        assert inbound.sender_name == "Ann Lee"
        assert inbound.sender_is_bot is False
        assert inbound.addressed is True
        assert inbound.command is None
        assert inbound.event == "message"
        assert inbound.text.startswith("Hello!")
        assert inbound.meta == {"update_id": 800000001}

    def test_start_is_answered_with_help(self) -> None:
        inbound = parsed("private_start")
        assert (inbound.command, inbound.command_args) == ("help", "")

    def test_bot_name_and_tenant_come_from_the_config(self) -> None:
        config = BotConfig(platform="telegram", bot_name="support", tenant_id="acme", token=TOKEN)
        inbound = parse("private_text", config)
        assert inbound is not None
        assert (inbound.bot_name, inbound.tenant_id) == ("support", "acme")


class TestGroups:
    def test_unaddressed_message_is_passed_on_as_context(self) -> None:
        inbound = parsed("group_unaddressed")
        assert inbound.chat_type == "group"
        assert inbound.chat_id == SUPERGROUP
        assert inbound.message_id == f"{SUPERGROUP}:301"
        assert inbound.addressed is False
        assert not should_trigger(inbound, trigger_mode="mention", answer_bots=False)
        assert should_trigger(inbound, trigger_mode="all", answer_bots=False)

    def test_basic_groups_are_groups(self) -> None:
        inbound = parsed("basic_group")
        assert (inbound.chat_type, inbound.chat_id) == ("group", "-4012345678")

    @pytest.mark.parametrize("name", ["group_mention", "group_mention_uppercase", "text_mention"])
    def test_mentions_address_the_bot(self, name: str) -> None:
        inbound = parsed(name)
        assert inbound.addressed is True
        assert should_trigger(inbound, trigger_mode="mention", answer_bots=False)
        assert not should_trigger(inbound, trigger_mode="commands", answer_bots=False)

    def test_mentioning_another_bot_does_not(self) -> None:
        assert parsed("group_mention_other").addressed is False

    def test_reply_to_the_bot_addresses_it(self) -> None:
        inbound = parsed("group_reply_to_bot")
        assert inbound.addressed is True
        assert inbound.reply_to_message_id == f"{SUPERGROUP}:309"

    def test_reply_to_a_person_does_not(self) -> None:
        inbound = parsed("group_reply_to_human")
        assert inbound.addressed is False
        assert inbound.reply_to_message_id == f"{SUPERGROUP}:301"

    def test_reply_threads_of_plain_supergroups_share_the_group_session(self) -> None:
        assert parsed("supergroup_reply_thread").thread_id == ""

    def test_caption_counts_as_text(self) -> None:
        inbound = parsed("photo_caption")
        assert inbound.text == "@gw_bot what is in this photo?"
        assert inbound.addressed is True

    def test_anonymous_admin_speaks_as_the_group_and_is_not_a_bot(self) -> None:
        inbound = parsed("anonymous_admin")
        assert inbound.sender_id == SUPERGROUP
        assert inbound.sender_name == "Night Shift"
        assert inbound.sender_is_bot is False
        assert should_trigger(inbound, trigger_mode="mention", answer_bots=False)


class TestCommands:
    def test_command_for_this_bot(self) -> None:
        inbound = parsed("group_command")
        assert (inbound.command, inbound.command_args) == ("usage", "")
        assert inbound.addressed is True
        assert should_trigger(inbound, trigger_mode="commands", answer_bots=False)

    def test_plain_command_with_arguments(self) -> None:
        inbound = parsed("group_command_plain")
        assert (inbound.command, inbound.command_args) == ("compress", "the deploy incident")
        assert inbound.addressed is False, "a bare /command may be meant for any bot"

    def test_command_for_another_bot_is_plain_text(self) -> None:
        inbound = parsed("group_command_other_bot")
        assert inbound.command is None
        assert inbound.addressed is False
        assert not should_trigger(inbound, trigger_mode="mention", answer_bots=False)


class TestForumTopics:
    def test_topic_is_its_own_session_and_reply_is_detected(self) -> None:
        inbound = parsed("forum_topic_reply_mention")
        assert (inbound.chat_id, inbound.thread_id) == (FORUM, "42")
        assert inbound.reply_to_message_id == f"{FORUM}:76"
        assert inbound.addressed is True

    def test_topic_opening_message_is_not_a_reply_even_when_the_bot_opened_it(self) -> None:
        inbound = parsed("forum_topic_plain")
        assert inbound.thread_id == "42"
        assert inbound.reply_to_message_id is None
        assert inbound.addressed is False
        assert inbound.sender_name == "Борис Петров"

    def test_general_topic_is_the_group_session(self) -> None:
        inbound = parsed("forum_general")
        assert (inbound.chat_id, inbound.thread_id) == (FORUM, "")


class TestEdits:
    def test_edited_message_is_an_edit_of_the_same_id(self) -> None:
        inbound = parsed("edited_message")
        assert inbound.event == "edit"
        assert inbound.message_id == f"{SUPERGROUP}:302"
        assert "disk alerts" in inbound.text

    def test_private_edit(self) -> None:
        inbound = parsed("edited_private")
        assert (inbound.event, inbound.message_id) == ("edit", "111111111:1365")


class TestBots:
    def test_other_bots_are_marked_and_not_answered_by_default(self) -> None:
        inbound = parsed("other_bot_author")
        assert inbound.sender_is_bot is True
        assert inbound.addressed is True
        assert not should_trigger(inbound, trigger_mode="mention", answer_bots=False)
        assert should_trigger(inbound, trigger_mode="mention", answer_bots=True)

    def test_own_messages_are_dropped(self) -> None:
        assert parse("own_message") is None


class TestNonLatin:
    def test_mention_after_emoji_uses_utf16_offsets(self) -> None:
        inbound = parsed("non_latin")
        assert inbound.addressed is True
        assert inbound.text == "Привет 👋🏽 @gw_bot, как дела? 你好"
        assert inbound.sender_name == "王芳"


class TestLinks:
    def test_text_links_show_where_they_point(self) -> None:
        # Reported: a text_link's URL is not in the text, so the model never saw it.
        inbound = parsed("text_link")
        assert inbound.text == (
            "👋🏽 see the runbook (https://wiki.example.com/ops/runbook?id=7&tab=deploy) "
            "and https://status.example.com, then ping me"
        )

    def test_caption_links_too_and_mentions_still_count(self) -> None:
        inbound = parsed("caption_text_link")
        assert inbound.text == (
            "@gw_bot is this the dashboard (https://grafana.example.com/d/abc)?"
        )
        assert inbound.addressed is True


class TestIgnored:
    @pytest.mark.parametrize(
        "name", ["sticker", "new_member", "channel_post", "my_chat_member", "own_message"]
    )
    def test_nothing_for_hubbub(self, name: str) -> None:
        assert parse(name) is None


class TestImages:
    def test_a_photo_without_caption_is_a_message_with_the_largest_size(self) -> None:
        inbound = parsed("private_photo")
        assert inbound.text == ""
        (image,) = inbound.images
        assert (image.ref, image.filename, image.width, image.height) == (
            "photo-large",
            "photo.jpg",
            1280,
            1280,
        )

    def test_the_largest_size_under_the_cap_is_chosen(self) -> None:
        inbound = parse("private_photo", BotConfig(platform="telegram", image_max_bytes=100_000))
        assert inbound is not None
        assert [i.ref for i in inbound.images] == ["photo-medium"]

    def test_when_no_size_fits_the_largest_goes_on_to_be_refused_at_fetch(self) -> None:
        inbound = parse("private_photo", BotConfig(platform="telegram", image_max_bytes=10))
        assert inbound is not None
        assert [i.ref for i in inbound.images] == ["photo-large"]

    def test_an_image_sent_as_a_file_keeps_its_name_and_caption(self) -> None:
        inbound = parsed("private_image_document")
        assert inbound.text == "the dashboard"
        (image,) = inbound.images
        assert (image.ref, image.filename, image.size) == ("doc-png", "dashboard.png", 5120)

    def test_other_files_are_no_images(self) -> None:
        assert parse("private_pdf_document") is None

    def test_caption_and_photo_travel_together(self) -> None:
        inbound = parsed("photo_caption")
        assert [i.ref for i in inbound.images] == ["AgACAgQAAxkBAAI"]
