"""The Discord deliverer against the local Discord REST API, through discord.py's HTTP client."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from adapters.base import BotConfig, DeliveryError
from adapters.discord import DiscordDeliverer
from adapters.discord.chunks import MESSAGE_LIMIT
from adapters.messages import ChatTarget, OutboundMessage
from tests.fixtures.platform_servers.discord import (
    DM_ID,
    GENERAL_ID,
    THREAD_ID,
    Failure,
    FakeDiscord,
    load_payload,
    running_fake_discord,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.usefixtures("_restore_discord_globals"),
]

TRIGGER = load_payload("message_create_mention")


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with running_fake_discord() as server:
        server.push("MESSAGE_CREATE", TRIGGER)  # the message replies point at
        yield server


@pytest.fixture
async def deliverer(fake: FakeDiscord) -> AsyncIterator[DiscordDeliverer]:
    config = BotConfig(platform="discord", token=fake.token, api_base=fake.base_url)
    async with DiscordDeliverer(config) as opened:
        assert isinstance(opened, DiscordDeliverer)
        yield opened


def reply(text: str, **fields: Any) -> OutboundMessage:
    values: dict[str, Any] = {
        "platform": "discord",
        "chat_id": GENERAL_ID,
        "chat_type": "group",
        "reply_to_message_id": TRIGGER["id"],
        "delivery_id": "41",
    }
    return OutboundMessage(text=text, **(values | fields))


class TestReplies:
    async def test_group_reply_references_its_message_and_pings_nobody_else(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        ids = await deliverer.deliver(reply("It moved to **10:30**. @everyone <@&1> relax"))
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert ids == [sent.message["id"]]
        assert sent.content == "It moved to **10:30**. @everyone <@&1> relax"
        assert sent.body["message_reference"] == {
            "type": 0,
            "message_id": int(TRIGGER["id"]),
            "channel_id": int(GENERAL_ID),
            "fail_if_not_exists": False,
        }
        assert sent.body["allowed_mentions"] == {"parse": [], "replied_user": True}
        assert sent.message["referenced_message"]["id"] == TRIGGER["id"]

    async def test_dm_reply_is_a_plain_message(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.deliver(
            reply("hello", chat_id=DM_ID, chat_type="private", reply_to_message_id="1")
        )
        (sent,) = fake.sent_messages(DM_ID)
        assert "message_reference" not in sent.body

    async def test_thread_reply_goes_to_the_thread(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.deliver(reply("in the thread", thread_id=THREAD_ID))
        assert fake.sent_messages(GENERAL_ID) == []
        (sent,) = fake.sent_messages(THREAD_ID)
        assert sent.body["message_reference"]["channel_id"] == int(THREAD_ID)

    async def test_slash_command_answer_is_a_channel_message(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.deliver(reply("usage…", reply_to_message_id="interaction:1313"))
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert "message_reference" not in sent.body

    async def test_reply_to_a_deleted_message_is_still_delivered(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.deliver(reply("still here", reply_to_message_id="1311000000000999999"))
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert "referenced_message" not in sent.message

    async def test_markdown_is_converted(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.deliver(reply("#### Plan\n\n| a | b |\n|---|---|\n| 1 | 2 |"))
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert sent.content == "**Plan**\n\n```\na | b\n--+--\n1 | 2\n```"

    async def test_long_reply_with_code_is_split_under_2000(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        code = "\n".join(f"step_{i} = run({i})  # {'x' * 40}" for i in range(120))
        prose = " ".join(f"Sentence number {i} explains a detail." for i in range(60))
        text = f"{prose}\n\n```python\n{code}\n```\n\n{prose}"
        ids = await deliverer.deliver(reply(text))
        sent = fake.sent_messages(GENERAL_ID)
        assert len(sent) >= 4
        assert ids == [m.message["id"] for m in sent]
        assert [("message_reference" in m.body) for m in sent] == [True] + [False] * (
            len(sent) - 1
        ), "only the first message is a reply"
        for message in sent:
            assert len(message.content) <= MESSAGE_LIMIT
            assert len(re.findall(r"^```", message.content, re.MULTILINE)) % 2 == 0
        code_lines = [
            line for m in sent for line in m.content.split("\n") if line.startswith("step_")
        ]
        assert code_lines == code.split("\n"), "every code line arrives once, in order"

    async def test_a_repeated_attempt_is_recognised_by_discord(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        text = "\n\n".join(["first part " * 150, "second part " * 150])
        first = await deliverer.deliver(reply(text, delivery_id="77"))
        again = await deliverer.deliver(reply(text, delivery_id="77"))
        assert again == first
        assert len(fake.sent_messages()) == 2
        assert len({m.body["nonce"] for m in fake.sent_messages()}) == 2
        assert all(m.body["enforce_nonce"] is True for m in fake.sent_messages())
        await deliverer.deliver(reply(text, delivery_id="78"))
        assert len(fake.sent_messages()) == 4, "another reply is another message"

    async def test_empty_reply_is_refused(self, deliverer: DiscordDeliverer) -> None:
        with pytest.raises(DeliveryError, match="empty") as caught:
            await deliverer.deliver(reply("  \n "))
        assert caught.value.retryable is False


class TestRateLimitsAndFailures:
    async def test_429_is_waited_out_and_sent_once(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        fake.fail_next(Failure.rate_limited(0.05))
        ids = await deliverer.deliver(reply("after the wait"))
        assert len(fake.attempts) == 2
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert ids == [sent.message["id"]]

    async def test_a_long_429_before_anything_was_sent_goes_back_to_the_outbox(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        fake.fail_next(Failure.rate_limited(45.0))
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply("later"))
        assert caught.value.retryable is True
        assert caught.value.retry_after == 45.0
        assert fake.sent_messages() == []

    async def test_a_cloudflare_429_is_retryable_with_its_header(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        fake.fail_next(Failure.rate_limited(3.0, via=False))
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply("later"))
        assert (caught.value.retryable, caught.value.retry_after) == (True, 3.0)

    async def test_a_refusal_after_a_chunk_went_out_resumes_after_it(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        text = "\n\n".join(["first part " * 150, "second part " * 150])
        fake.fail_when = lambda _body: Failure.rate_limited(45.0) if fake.sent else None
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply(text))
        (first,) = fake.sent_messages()
        error = caught.value
        assert (error.retryable, error.maybe_sent, error.delivered_chunks) == (True, False, 1)
        assert error.delivered_ids == (first.message["id"],)
        fake.fail_when = None
        ids = await deliverer.deliver(
            reply(text, delivered_chunks=1, delivered_ids=error.delivered_ids)
        )
        assert [m.message["id"] for m in fake.sent_messages()] == ids
        assert len(ids) == 2
        assert fake.sent_messages()[1].reference_id is None, "only the first part replies"

    async def test_outage_is_retryable_and_missing_rights_are_not(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        fake.fail_next(Failure.unavailable())
        with pytest.raises(DeliveryError) as outage:
            await deliverer.deliver(reply("x"))
        assert outage.value.retryable is True
        assert outage.value.maybe_sent is True, "Discord does not say a 503 created nothing"
        fake.fail_next(Failure.forbidden())
        with pytest.raises(DeliveryError, match="Send Messages") as forbidden:
            await deliverer.deliver(reply("x"))
        assert forbidden.value.retryable is False

    async def test_refused_formatting_falls_back_to_literal_text(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        fake.reject_content = lambda content: "**" in content
        ids = await deliverer.deliver(reply("The **deploy** is at 10:30_ish"))
        (sent,) = fake.sent_messages(GENERAL_ID)
        assert sent.content == r"The \*\*deploy\*\* is at 10:30\_ish"
        assert ids == [sent.message["id"]]
        assert sent.reference_id == TRIGGER["id"]
        assert len(fake.attempts) == 2

    async def test_a_refused_token_is_final(self, fake: FakeDiscord) -> None:
        config = BotConfig(platform="discord", token="wrong", api_base=fake.base_url)
        async with DiscordDeliverer(config) as deliverer:
            with pytest.raises(DeliveryError, match="HUBBUB_DISCORD_TOKEN") as caught:
                await deliverer.deliver(reply("x"))
        assert caught.value.retryable is False
        assert fake.attempts == []

    async def test_unreachable_discord_is_retryable(self) -> None:
        config = BotConfig(platform="discord", token="t", api_base="http://127.0.0.1:9")
        async with DiscordDeliverer(config) as deliverer:
            with pytest.raises(DeliveryError) as caught:
                await deliverer.deliver(reply("x"))
        assert caught.value.retryable is True


class TestTyping:
    async def test_typing_shows_until_the_reply_goes_out(
        self, fake: FakeDiscord, deliverer: DiscordDeliverer
    ) -> None:
        await deliverer.send_typing(ChatTarget(platform="discord", chat_id=GENERAL_ID))
        await deliverer.send_typing(
            ChatTarget(platform="discord", chat_id=GENERAL_ID, thread_id=THREAD_ID)
        )
        assert fake.typing == [GENERAL_ID, THREAD_ID]
        assert deliverer._typing.active() == {int(GENERAL_ID), int(THREAD_ID)}
        await deliverer.deliver(reply("done"))
        await asyncio.sleep(0)
        assert deliverer._typing.active() == {int(THREAD_ID)}

    async def test_typing_failures_are_swallowed(self, fake: FakeDiscord) -> None:
        config = BotConfig(platform="discord", token="wrong", api_base=fake.base_url)
        async with DiscordDeliverer(config) as deliverer:
            await deliverer.send_typing(ChatTarget(platform="discord", chat_id=GENERAL_ID))
        assert fake.typing == []
