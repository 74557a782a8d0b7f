"""Slash commands become typed commands; the typing indicator keeps itself up."""

from __future__ import annotations

import asyncio

import discord
import pytest

from adapters.base import BotConfig
from adapters.discord.channels import locate
from adapters.discord.indicator import TypingIndicators
from adapters.discord.slash import DESCRIPTIONS, command_message
from tests.fixtures.platform_servers.discord import (
    ANN_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    THREAD_ID,
    TOKEN,
    load_payload,
)
from tests.unit.adapters.discord.conftest import Parsed

CONFIG = BotConfig(platform="discord", token=TOKEN)


def interaction(parsed: Parsed, name: str) -> discord.Interaction:
    return discord.Interaction(data=load_payload(name), state=parsed.state)  # type: ignore[arg-type]


class TestSlashCommands:
    def test_registered_commands(self, parsed: Parsed) -> None:
        commands = {
            c.name: c.to_dict(parsed.client.tree) for c in parsed.client.tree.get_commands()
        }
        assert set(commands) == {
            "new",
            "compress",
            "usage",
            "memory",
            "forget",
            "stop",
            "model",
            "help",
        }
        assert commands["usage"]["description"] == DESCRIPTIONS["usage"]
        (focus,) = commands["compress"]["options"]
        assert (focus["name"], focus["type"], focus["required"]) == ("focus", 3, False)
        (model,) = commands["model"]["options"]
        assert (model["name"], model["type"], model["required"]) == ("name", 3, False)
        (text,) = commands["forget"]["options"]
        assert (text["name"], text["type"], text["required"]) == ("text", 3, False)
        plain = ("new", "usage", "memory", "stop", "help")
        assert all(not commands[name]["options"] for name in plain)

    def test_guild_command_becomes_a_typed_command(self, parsed: Parsed) -> None:
        used = interaction(parsed, "interaction_create_compress")
        location = locate(used.channel)
        assert location is not None
        inbound = command_message(
            used, "compress", "the auth bug", config=CONFIG, location=location, ack_id=99
        )
        assert inbound.message_id == "interaction:1313000000000000001"
        assert (inbound.command, inbound.command_args) == ("compress", "the auth bug")
        assert inbound.text == "/compress the auth bug"
        assert (inbound.chat_id, inbound.chat_type, inbound.thread_id) == (GENERAL_ID, "group", "")
        assert (inbound.sender_id, inbound.sender_name) == (ANN_ID, "Ann Lee")
        assert inbound.addressed is True
        assert inbound.reply_to_message_id is None
        assert inbound.meta == {
            "interaction_id": "1313000000000000001",
            "ack_message_id": "99",
            "guild_id": GUILD_ID,
        }

    def test_dm_command_is_private(self, parsed: Parsed) -> None:
        used = interaction(parsed, "interaction_create_usage_dm")
        location = locate(used.channel)
        assert location is not None
        inbound = command_message(used, "usage", "", config=CONFIG, location=location)
        assert (inbound.chat_id, inbound.chat_type, inbound.text) == (DM_ID, "private", "/usage")

    def test_thread_command_belongs_to_the_thread(self, parsed: Parsed) -> None:
        used = interaction(parsed, "interaction_create_new_thread")
        location = locate(used.channel)
        assert location is not None
        inbound = command_message(used, "new", "", config=CONFIG, location=location)
        assert (inbound.chat_id, inbound.thread_id) == (GENERAL_ID, THREAD_ID)


@pytest.mark.anyio
class TestTypingIndicators:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    async def test_renews_until_stopped(self) -> None:
        triggered = asyncio.Event()
        count = 0

        async def trigger() -> None:
            nonlocal count
            count += 1
            if count >= 3:
                triggered.set()

        typing = TypingIndicators(refresh_seconds=0.001, max_seconds=60)
        await typing.start(1, trigger)
        assert count == 1, "the first trigger is sent before start returns"
        await asyncio.wait_for(triggered.wait(), 5)
        typing.stop(1)
        await asyncio.sleep(0)
        stopped_at = count
        await asyncio.sleep(0.02)
        assert count == stopped_at
        assert typing.active() == set()

    async def test_a_reply_during_the_first_trigger_wins(self) -> None:
        typing = TypingIndicators(refresh_seconds=0.001, max_seconds=60)

        async def reply_meanwhile() -> None:
            typing.stop(1)

        await typing.start(1, reply_meanwhile)
        assert typing.active() == set(), "no indicator is kept up after the reply"

    async def test_gives_up_after_the_ceiling(self) -> None:
        calls = 0

        async def trigger() -> None:
            nonlocal calls
            calls += 1

        typing = TypingIndicators(refresh_seconds=0.001, max_seconds=0.0005)
        await typing.start(1, trigger)
        for _ in range(100):
            if not typing.active():
                break
            await asyncio.sleep(0.001)
        assert typing.active() == set()
        assert calls == 1

    async def test_a_failing_renewal_ends_quietly_and_close_cancels(self) -> None:
        async def flaky() -> None:
            if typing.active():
                raise OSError("gone")

        typing = TypingIndicators(refresh_seconds=0.001, max_seconds=60)
        await typing.start(1, flaky)
        for _ in range(200):
            if not typing.active():
                break
            await asyncio.sleep(0.001)
        assert typing.active() == set()

        async def fine() -> None:
            return None

        await typing.start(2, fine)
        await typing.close()
        assert typing.active() == set()
