"""The Discord listener against the local Discord: discord.py's real gateway and REST paths."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapters.base import Allowlist, BotConfig
from adapters.discord import DiscordListener, create_listener, create_webhook
from adapters.discord.errors import DiscordListenerError
from adapters.messages import InboundMessage
from tests.fixtures.platform_servers.discord import (
    ANN_ID,
    DM_ID,
    GENERAL_ID,
    THREAD_ID,
    UNCACHED_THREAD_ID,
    FakeDiscord,
    load_payload,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

MESSAGE_CONTENT = 1 << 15
GUILDS = 1 << 0
GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12


async def eventually(predicate: Callable[[], Any], what: str, within: float = 10) -> Any:
    """Poll ``predicate`` on the test's loop until it is truthy (fail after ``within`` s)."""
    try:
        async with asyncio.timeout(within):
            # The state lives on the fake's thread: there is no event to await.
            while not (value := predicate()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
    return value


@dataclass
class Running:
    """A listener task and what its sink received."""

    listener: DiscordListener
    task: asyncio.Task[None]
    received: list[InboundMessage] = field(default_factory=list)

    def by_id(self, message_id: str) -> list[InboundMessage]:
        return [m for m in self.received if m.message_id == message_id]


async def start_listener(fake: FakeDiscord, **config: Any) -> Running:
    received: list[InboundMessage] = []

    async def sink(inbound: InboundMessage) -> None:
        received.append(inbound)

    bot = BotConfig(platform="discord", token=fake.token, api_base=fake.base_url, **config)
    listener = create_listener(bot, sink)
    assert isinstance(listener, DiscordListener)
    running = Running(listener, asyncio.create_task(listener.run()), received)
    await eventually(lambda: fake.identifies or running.task.done(), "IDENTIFY")
    await eventually(lambda: fake.connected(), "a live session")
    return running


@pytest.fixture
async def running(fake: FakeDiscord) -> AsyncIterator[Running]:
    started = await start_listener(fake)
    yield started
    started.task.cancel()
    await asyncio.gather(started.task, return_exceptions=True)


async def push_and_wait(
    fake: FakeDiscord, running: Running, payload: dict[str, Any], event: str = "MESSAGE_CREATE"
) -> InboundMessage:
    before = len(running.received)
    fake.push(event, payload)
    await eventually(lambda: len(running.received) > before, f"{event} at the sink")
    return running.received[-1]


class TestConnection:
    async def test_identify_carries_the_message_content_intent(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        (identify,) = fake.identifies
        assert identify["token"] == fake.token
        intents = identify["intents"]
        for bit in (GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT):
            assert intents & bit, f"intent bit {bit} missing from {intents:b}"
        assert ("GET", "/api/v10/gateway/bot") in fake.requests, "gateway URL asked of the API"

    async def test_slash_commands_are_registered_by_bulk_overwrite(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        (commands,) = fake.command_syncs
        assert sorted(c["name"] for c in commands) == [
            "compress",
            "forget",
            "help",
            "memory",
            "model",
            "new",
            "stop",
            "usage",
        ]
        (compress,) = [c for c in commands if c["name"] == "compress"]
        assert [o["name"] for o in compress["options"]] == ["focus"]
        (forget,) = [c for c in commands if c["name"] == "forget"]
        assert [(o["name"], o["required"]) for o in forget["options"]] == [("text", False)]

    async def test_webhook_is_not_used(self, fake: FakeDiscord) -> None:
        bot = BotConfig(platform="discord", token=fake.token, api_base=fake.base_url)

        async def sink(_: InboundMessage) -> None:
            raise AssertionError("unused")

        assert create_webhook(bot, sink) is None

    async def test_cancelling_closes_the_client_cleanly(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        running.task.cancel()
        results = await asyncio.gather(running.task, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        assert running.listener.client is not None
        assert running.listener.client.is_closed()
        await eventually(lambda: not fake.connected(), "the socket closed")

    async def test_a_refused_token_stops_with_a_clear_error(self, fake: FakeDiscord) -> None:
        async def sink(_: InboundMessage) -> None:
            raise AssertionError("unused")

        listener = DiscordListener(
            BotConfig(platform="discord", token="wrong", api_base=fake.base_url), sink
        )
        with pytest.raises(DiscordListenerError, match="HUBBUB_DISCORD_TOKEN"):
            await listener.run()
        assert fake.identifies == []

    async def test_a_refused_message_content_intent_says_where_to_enable_it(
        self, fake: FakeDiscord
    ) -> None:
        async def sink(_: InboundMessage) -> None:
            raise AssertionError("unused")

        fake.message_content_allowed = False
        listener = DiscordListener(
            BotConfig(platform="discord", token=fake.token, api_base=fake.base_url), sink
        )
        with pytest.raises(DiscordListenerError, match="Privileged Gateway Intents"):
            await listener.run()
        assert listener.client is not None
        assert listener.client.is_closed()


class TestMessages:
    async def test_channel_mention_thread_and_dm(self, fake: FakeDiscord, running: Running) -> None:
        channel = await push_and_wait(fake, running, load_payload("message_create_group"))
        assert (channel.chat_id, channel.chat_type, channel.addressed) == (
            GENERAL_ID,
            "group",
            False,
        )
        mention = await push_and_wait(fake, running, load_payload("message_create_mention"))
        assert mention.addressed is True
        thread = await push_and_wait(fake, running, load_payload("message_create_thread"))
        assert (thread.chat_id, thread.thread_id) == (GENERAL_ID, THREAD_ID)
        dm = await push_and_wait(fake, running, load_payload("message_create_private"))
        assert (dm.chat_id, dm.chat_type, dm.sender_id) == (DM_ID, "private", ANN_ID)

    async def test_own_messages_never_reach_the_sink(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        fake.push("MESSAGE_CREATE", load_payload("message_create_own"))
        marker = await push_and_wait(fake, running, load_payload("message_create_group"))
        assert [m.message_id for m in running.received] == [marker.message_id]

    async def test_a_thread_discord_py_has_not_seen_is_looked_up(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        payload = load_payload("message_create_thread")
        payload["channel_id"] = UNCACHED_THREAD_ID
        inbound = await push_and_wait(fake, running, payload)
        assert (inbound.chat_id, inbound.thread_id) == (GENERAL_ID, UNCACHED_THREAD_ID)
        assert fake.channel_lookups == [UNCACHED_THREAD_ID]

    async def test_edits_and_deletes(self, fake: FakeDiscord, running: Running) -> None:
        original = await push_and_wait(fake, running, load_payload("message_create_group"))
        edit = await push_and_wait(fake, running, load_payload("message_update"), "MESSAGE_UPDATE")
        assert (edit.event, edit.message_id) == ("edit", original.message_id)
        assert "11:00" in edit.text
        delete = await push_and_wait(
            fake, running, load_payload("message_delete"), "MESSAGE_DELETE"
        )
        assert (delete.event, delete.message_id) == ("delete", original.message_id)

    async def test_non_latin_text(self, fake: FakeDiscord, running: Running) -> None:
        inbound = await push_and_wait(fake, running, load_payload("message_create_non_latin"))
        assert "明日のデプロイ" in inbound.text
        assert "Привет" in inbound.text
        assert inbound.sender_name == "ゆきさん"


class TestReconnect:
    async def test_a_dropped_connection_resumes_and_replays_missed_events(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        await push_and_wait(fake, running, load_payload("message_create_group"))
        session_id = fake.identifies[0]
        fake.close_gateway(4000)
        missed = load_payload("message_create_mention")
        fake.push("MESSAGE_CREATE", missed)
        await eventually(lambda: fake.resumes, "RESUME")
        await eventually(lambda: running.by_id(missed["id"]), "the missed message")
        (resume,) = fake.resumes
        assert resume["session_id"].startswith("session-")
        assert resume["seq"] >= 3, "READY, GUILD_CREATE and the first message were seen"
        assert len(fake.identifies) == 1, "resumed, not re-identified"
        assert session_id is fake.identifies[0]
        after = await push_and_wait(fake, running, load_payload("message_create_thread"))
        assert after.thread_id == THREAD_ID
        assert len(running.by_id(missed["id"])) == 1, "replayed once"

    async def test_an_invalidated_session_identifies_again(
        self, fake: FakeDiscord, running: Running, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def no_identify_pause(shard_id: int | None, *, initial: bool = False) -> None:
            """discord.py pauses 5 s before a repeated IDENTIFY (Discord's identify limit)."""

        assert running.listener.client is not None
        monkeypatch.setattr(running.listener.client, "before_identify_hook", no_identify_pause)
        fake.invalidate_session()
        await eventually(lambda: len(fake.identifies) == 2, "a second IDENTIFY")
        await eventually(lambda: fake.connected(), "a live session")
        inbound = await push_and_wait(fake, running, load_payload("message_create_mention"))
        assert inbound.addressed is True


class TestSlashCommands:
    async def test_acknowledged_at_once_and_handed_over_as_a_command(
        self, fake: FakeDiscord, running: Running
    ) -> None:
        payload = load_payload("interaction_create_compress")
        inbound = await push_and_wait(fake, running, payload, "INTERACTION_CREATE")
        (callback,) = fake.interaction_callbacks
        assert callback["interaction_id"] == payload["id"]
        assert callback["token"] == payload["token"]
        assert callback["type"] == 4
        assert callback["data"]["content"] == "Working on `/compress`\u2026"
        assert not callback["data"].get("flags")
        assert inbound.message_id == f"interaction:{payload['id']}"
        assert (inbound.command, inbound.command_args) == ("compress", "the auth bug")
        assert inbound.meta["ack_message_id"].isdigit()
        assert fake.sent_messages() == [], "the answer comes from the outbox, not here"

    @pytest.mark.parametrize(
        ("name", "options", "args"),
        [
            ("model", [{"name": "name", "type": 3, "value": " openai/gpt-4o "}], "openai/gpt-4o"),
            ("model", [], ""),
            ("stop", [], ""),
            ("memory", [], ""),
            ("forget", [{"name": "text", "type": 3, "value": " the deploy "}], "the deploy"),
            ("forget", [], ""),
        ],
    )
    async def test_menu_commands_are_handed_over_as_commands(
        self,
        fake: FakeDiscord,
        running: Running,
        name: str,
        options: list[dict[str, Any]],
        args: str,
    ) -> None:
        payload = load_payload("interaction_create_compress")
        payload["data"] |= {"name": name, "options": options}
        inbound = await push_and_wait(fake, running, payload, "INTERACTION_CREATE")
        (callback,) = fake.interaction_callbacks
        assert callback["data"]["content"] == f"Working on `/{name}`\u2026"
        assert (inbound.command, inbound.command_args) == (name, args)
        assert inbound.text == f"/{name} {args}".strip()

    async def test_refused_outside_the_allowlist(self, fake: FakeDiscord) -> None:
        running = await start_listener(fake, allow_users=frozenset({"someone-else"}))
        try:
            fake.push("INTERACTION_CREATE", load_payload("interaction_create_usage_dm"))
            await eventually(lambda: fake.interaction_callbacks, "the refusal")
            (callback,) = fake.interaction_callbacks
            assert callback["data"]["flags"] & 64, "ephemeral: only the user sees it"
            assert "does not take commands" in callback["data"]["content"]
            marker = await push_and_wait(fake, running, load_payload("message_create_group"))
            assert [m.message_id for m in running.received] == [marker.message_id]
        finally:
            running.task.cancel()
            await asyncio.gather(running.task, return_exceptions=True)

    async def test_the_allowlist_is_read_as_it_is_now_for_each_command(
        self, fake: FakeDiscord
    ) -> None:
        current = [Allowlist(users=frozenset({"someone-else"}))]

        async def live() -> Allowlist:
            return current[0]

        running = await start_listener(fake, live_allowlist=live)
        try:
            refused = load_payload("interaction_create_usage_dm")
            fake.push("INTERACTION_CREATE", refused)
            await eventually(lambda: fake.interaction_callbacks, "the refusal")
            assert "does not take commands" in fake.interaction_callbacks[0]["data"]["content"]

            current[0] = Allowlist(users=frozenset({refused["user"]["id"]}))
            allowed = refused | {"id": str(int(refused["id"]) + 1)}
            inbound = await push_and_wait(fake, running, allowed, "INTERACTION_CREATE")
            assert inbound.command == "usage"
            assert fake.interaction_callbacks[1]["data"]["content"] == "Working on `/usage`\u2026"
        finally:
            running.task.cancel()
            await asyncio.gather(running.task, return_exceptions=True)

    async def test_a_failed_handover_is_reported_in_the_acknowledgement(
        self, fake: FakeDiscord
    ) -> None:
        async def broken_sink(_: InboundMessage) -> None:
            raise RuntimeError("database unavailable")

        listener = DiscordListener(
            BotConfig(platform="discord", token=fake.token, api_base=fake.base_url), broken_sink
        )
        task = asyncio.create_task(listener.run())
        try:
            await eventually(lambda: fake.connected(), "a live session")
            fake.push("INTERACTION_CREATE", load_payload("interaction_create_new_thread"))
            await eventually(lambda: fake.original_edits, "the acknowledgement edited")
            assert "could not be queued" in fake.original_edits[0]["content"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
