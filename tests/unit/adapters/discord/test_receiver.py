"""Gateway events reach the sink converted at arrival, in order, exactly as parsed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import discord
import pytest

from adapters.base import BotConfig
from adapters.discord.channels import ChannelResolver, locate
from adapters.discord.inbound import Location
from tests.fixtures.platform_servers.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    THREAD_ID,
    TOKEN,
    UNCACHED_THREAD_ID,
    load_payload,
)
from tests.unit.adapters.discord.conftest import Parsed

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def consuming(parsed: Parsed) -> AsyncIterator[Parsed]:
    task = asyncio.create_task(parsed.client.receiver.consume())
    yield parsed
    task.cancel()


async def settle(parsed: Parsed) -> None:
    await parsed.client.receiver.drain(5)


class TestOrderAndSnapshot:
    async def test_messages_reach_the_sink_in_arrival_order(self, consuming: Parsed) -> None:
        names = ["message_create_group", "message_create_mention", "message_create_thread"]
        for name in names:
            consuming.parse("MESSAGE_CREATE", load_payload(name))
        await settle(consuming)
        assert [m.message_id for m in consuming.received] == [
            load_payload(name)["id"] for name in names
        ]

    async def test_an_edit_right_after_a_message_does_not_rewrite_it(
        self, consuming: Parsed
    ) -> None:
        consuming.parse("MESSAGE_CREATE", load_payload("message_create_group"))
        consuming.parse("MESSAGE_UPDATE", load_payload("message_update"))
        await settle(consuming)
        original, edit = consuming.received
        assert (original.event, edit.event) == ("message", "edit")
        assert "10:30 because" in original.text
        assert "11:00 (not 10:30)" in edit.text

    async def test_delete_of_a_cached_message_knows_its_author(self, consuming: Parsed) -> None:
        consuming.parse("MESSAGE_CREATE", load_payload("message_create_group"))
        consuming.parse("MESSAGE_DELETE", load_payload("message_delete"))
        await settle(consuming)
        deleted = consuming.received[-1]
        assert deleted.event == "delete"
        assert deleted.message_id == load_payload("message_delete")["id"]
        assert deleted.sender_name == "Ann Lee"

    async def test_delete_of_an_uncached_message_still_arrives(self, consuming: Parsed) -> None:
        consuming.parse("MESSAGE_DELETE", {"id": "77", "channel_id": DM_ID})
        await settle(consuming)
        (deleted,) = consuming.received
        assert (deleted.message_id, deleted.chat_type, deleted.sender_id) == ("77", "private", None)

    async def test_bulk_delete_removes_each(self, consuming: Parsed) -> None:
        consuming.parse(
            "MESSAGE_DELETE_BULK",
            {"ids": ["12", "11"], "channel_id": GENERAL_ID, "guild_id": GUILD_ID},
        )
        await settle(consuming)
        assert [(m.event, m.message_id) for m in consuming.received] == [
            ("delete", "11"),
            ("delete", "12"),
        ]


class TestFiltering:
    async def test_own_messages_are_remembered_not_sunk(self, consuming: Parsed) -> None:
        own = load_payload("message_create_own")
        consuming.parse("MESSAGE_CREATE", own)
        reply = load_payload("message_create_reply_to_bot")
        reply["referenced_message"] = None
        reply["mentions"] = []
        reply["message_reference"]["message_id"] = own["id"]
        consuming.parse("MESSAGE_CREATE", reply)
        await settle(consuming)
        (inbound,) = consuming.received
        assert inbound.message_id == reply["id"]
        assert inbound.addressed is True, "a reply to a message the bot was seen posting"

    async def test_own_edits_and_link_previews_are_not_edits(self, consuming: Parsed) -> None:
        own = load_payload("message_create_own")
        own["edited_timestamp"] = "2024-11-29T09:00:00+00:00"
        consuming.parse("MESSAGE_UPDATE", own)
        preview = load_payload("message_create_group")
        preview["embeds"] = [{"type": "link", "url": "https://example.com"}]
        consuming.parse("MESSAGE_UPDATE", preview)
        await settle(consuming)
        assert consuming.received == []

    async def test_a_failing_sink_does_not_stop_the_queue(self, parsed: Parsed) -> None:
        calls: list[str] = []

        async def flaky(inbound: Any) -> None:
            calls.append(inbound.message_id)
            if len(calls) == 1:
                raise RuntimeError("database is down")

        parsed.client.receiver._sink = flaky
        task = asyncio.create_task(parsed.client.receiver.consume())
        try:
            parsed.parse("MESSAGE_CREATE", load_payload("message_create_group"))
            parsed.parse("MESSAGE_CREATE", load_payload("message_create_mention"))
            await settle(parsed)
        finally:
            task.cancel()
        assert len(calls) == 2


class _Source:
    def __init__(self, fetched: object | Exception) -> None:
        self.fetched = fetched
        self.fetches = 0

    def get_channel(self, id: int, /) -> object | None:
        return None

    async def fetch_channel(self, channel_id: int, /) -> object:
        self.fetches += 1
        if isinstance(self.fetched, Exception):
            raise self.fetched
        return self.fetched


class TestChannels:
    def test_cached_channels_are_located_without_lookups(self, parsed: Parsed) -> None:
        general = parsed.client.get_channel(int(GENERAL_ID))
        thread = parsed.client.get_channel(int(THREAD_ID))
        assert locate(general) == Location(GENERAL_ID, "group", "", GUILD_ID)
        assert locate(thread) == Location(GENERAL_ID, "group", THREAD_ID, GUILD_ID)

    def test_partial_channels(self, parsed: Parsed) -> None:
        state = parsed.state
        text = discord.PartialMessageable(
            state=state, id=5, guild_id=int(GUILD_ID), type=discord.ChannelType.text
        )
        unknown = discord.PartialMessageable(state=state, id=6, guild_id=int(GUILD_ID))
        dm = discord.PartialMessageable(state=state, id=7)
        assert locate(text) == Location("5", "group", "", GUILD_ID)
        assert locate(unknown) is None
        assert locate(dm) == Location("7", "private")

    async def test_an_uncached_thread_is_looked_up_once(self, parsed: Parsed) -> None:
        guild = parsed.client.get_guild(int(GUILD_ID))
        assert guild is not None
        thread = discord.Thread(
            guild=guild, state=parsed.state, data=cast(Any, load_payload("channel_thread_uncached"))
        )
        source = _Source(thread)
        resolver = ChannelResolver(source)
        for _ in range(3):
            found = await resolver.resolve(int(UNCACHED_THREAD_ID), guild_id=int(GUILD_ID))
            assert found == Location(GENERAL_ID, "group", UNCACHED_THREAD_ID, GUILD_ID)
        assert source.fetches == 1

    async def test_a_failed_lookup_keeps_the_message(self) -> None:
        resolver = ChannelResolver(_Source(OSError("unreachable")))
        found = await resolver.resolve(9, guild_id=int(GUILD_ID))
        assert found == Location("9", "group", "", GUILD_ID)


async def test_uncached_thread_message_is_relocated_before_the_sink(
    parsed_for: Callable[[BotConfig], Parsed],
) -> None:
    parsed = parsed_for(BotConfig(platform="discord", token=TOKEN))
    guild = parsed.client.get_guild(int(GUILD_ID))
    assert guild is not None
    thread = discord.Thread(
        guild=guild, state=parsed.state, data=cast(Any, load_payload("channel_thread_uncached"))
    )
    parsed.client.receiver._resolver = ChannelResolver(_Source(thread))
    payload = load_payload("message_create_thread")
    payload["channel_id"] = UNCACHED_THREAD_ID
    task = asyncio.create_task(parsed.client.receiver.consume())
    try:
        parsed.parse("MESSAGE_CREATE", payload)
        await settle(parsed)
    finally:
        task.cancel()
    (inbound,) = parsed.received
    assert (inbound.chat_id, inbound.thread_id) == (GENERAL_ID, UNCACHED_THREAD_ID)
    assert inbound.meta["channel_id"] == UNCACHED_THREAD_ID
    assert inbound.addressed is True
    assert BOT_ID in payload["content"]
