"""SlackDeliverer through slack_sdk against the fake Web API: threading, splitting, 429s."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.base import BotConfig, DeliveryError
from adapters.messages import ChatTarget, OutboundMessage
from adapters.pacing import PacingConfig
from adapters.slack import SlackDeliverer
from adapters.slack.chunks import MAX_MESSAGE_CHARS
from adapters.slack.deliverer import RATE_LIMIT_BUDGET_SECONDS, TYPING_STATUS
from adapters.slack.mrkdwn import to_mrkdwn
from tests.fixtures.pacing import paced
from tests.fixtures.platform_servers.slack import (
    BOT_TOKEN,
    FakeSlack,
    SlackFailure,
)
from tests.fixtures.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


class Sleeps:
    """Records the waits a deliverer asks for instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_deliverer(
    api_base: str, sleeps: Sleeps, pacing: PacingConfig | None = None
) -> SlackDeliverer:
    config = BotConfig(
        platform="slack", token=BOT_TOKEN, api_base=api_base, pacing=pacing or paced("slack")
    )
    return SlackDeliverer(
        config,
        sleep=sleeps,
    )


@pytest.fixture
def deliverer(fake_slack: FakeSlack, sleeps: Sleeps) -> SlackDeliverer:
    return make_deliverer(fake_slack.api_base, sleeps)


def reply(text: str, **fields: Any) -> OutboundMessage:
    values: dict[str, Any] = {
        "platform": "slack",
        "chat_id": "C0GENERAL",
        "chat_type": "group",
        "text": text,
        "reply_to_message_id": "C0GENERAL:1732799200.000300",
        "delivery_id": "42",
    }
    return OutboundMessage(**(values | fields))


def long_text(paragraphs: int = 4) -> str:
    """About 1,300 characters per paragraph: several messages at Slack's limit."""
    return "\n\n".join(f"Part {i}: " + "All good & *fine* here. " * 55 for i in range(paragraphs))


class TestWhere:
    async def test_reply_to_a_channel_message_starts_a_thread_under_it(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        ids = await deliverer.deliver(reply("We deploy on **Thursdays** & <never> on Fridays."))
        (posted,) = fake_slack.posted()
        assert posted == {
            "channel": "C0GENERAL",
            "text": "We deploy on *Thursdays* &amp; &lt;never&gt; on Fridays.",
            "thread_ts": "1732799200.000300",
            "mrkdwn": True,
            "metadata": {
                "event_type": "hubbub_reply",
                "event_payload": {"delivery_id": "42", "chunk": 0},
            },
        }
        assert ids == fake_slack.posted_ids()
        assert fake_slack.calls_to("chat.postMessage")[0].token == BOT_TOKEN

    async def test_thread_reply_stays_in_its_thread(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        await deliverer.deliver(
            reply(
                "ok",
                thread_id="1732799300.000400",
                reply_to_message_id="C0GENERAL:1732799400.000500",
            )
        )
        (posted,) = fake_slack.posted()
        assert posted["thread_ts"] == "1732799300.000400"

    async def test_dm_reply_is_posted_in_the_dm(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        await deliverer.deliver(
            reply(
                "hi", chat_id="D0ALICE01", chat_type="private", reply_to_message_id="D0ALICE01:1.2"
            )
        )
        (posted,) = fake_slack.posted()
        assert posted["channel"] == "D0ALICE01"
        assert "thread_ts" not in posted

    async def test_slash_command_answer_goes_to_the_channel(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        await deliverer.deliver(reply("Fresh session.", reply_to_message_id="C0GENERAL:cmd:1.2.ab"))
        (posted,) = fake_slack.posted()
        assert "thread_ts" not in posted

    async def test_non_latin_reply(self, deliverer: SlackDeliverer, fake_slack: FakeSlack) -> None:
        await deliverer.deliver(reply("Деплой — **завтра**. 明日は`deploy`です 🚀"))
        (posted,) = fake_slack.posted()
        assert posted["text"] == "Деплой — *завтра*. 明日は\u200b`deploy`\u200bです 🚀"


class TestSplitting:
    async def test_long_reply_is_posted_in_order_in_one_thread(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        text = long_text(8)
        ids = await deliverer.deliver(reply(text))
        posted = fake_slack.posted()
        assert len(posted) > 1
        assert ids == fake_slack.posted_ids()
        assert all(len(p["text"]) <= MAX_MESSAGE_CHARS for p in posted)
        assert {p["thread_ts"] for p in posted} == {"1732799200.000300"}
        assert "\n\n".join(p["text"] for p in posted) == to_mrkdwn(text.strip())

    async def test_long_code_block_is_posted_as_well_formed_blocks(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        code = "\n".join(f"step_{i}() if a < b else None" for i in range(400))
        await deliverer.deliver(reply(f"Run this:\n\n```python\n{code}\n```"))
        posted = [p["text"] for p in fake_slack.posted()]
        assert len(posted) > 2
        assert all(p.count("```") == 2 for p in posted if "step_" in p)

    async def test_empty_reply_is_refused(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        with pytest.raises(DeliveryError, match="empty") as caught:
            await deliverer.deliver(reply("  \n "))
        assert not caught.value.retryable
        assert fake_slack.posted() == []


class TestRateLimits:
    async def test_429_is_waited_out_and_the_chunk_sent_once(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack, sleeps: Sleeps
    ) -> None:
        fake_slack.fail_next("chat.postMessage", SlackFailure.rate_limited(2))
        ids = await deliverer.deliver(reply("hello"))
        assert sleeps.waits == [2.0]
        assert len(fake_slack.posted()) == 1
        assert ids == fake_slack.posted_ids()

    async def test_429_in_the_middle_does_not_resend_earlier_chunks(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack, sleeps: Sleeps
    ) -> None:
        text = long_text(8)
        fake_slack.fail_next(
            "chat.postMessage", None, SlackFailure.rate_limited(3), SlackFailure.rate_limited(1)
        )
        ids = await deliverer.deliver(reply(text))
        assert sleeps.waits == [3.0, 1.0]
        posted = [p["text"] for p in fake_slack.posted()]
        assert len(posted) == len(ids) > 2
        assert len(set(posted)) == len(posted), "no chunk was posted twice"
        assert "\n\n".join(posted) == to_mrkdwn(text.strip())

    async def test_429_beyond_the_budget_before_anything_is_sent_is_retryable(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack, sleeps: Sleeps
    ) -> None:
        wait = RATE_LIMIT_BUDGET_SECONDS + 15
        fake_slack.fail_next("chat.postMessage", SlackFailure.rate_limited(wait))
        with pytest.raises(DeliveryError, match="rate limited") as caught:
            await deliverer.deliver(reply("hello"))
        assert caught.value.retryable
        assert caught.value.retry_after == wait
        assert sleeps.waits == []
        assert fake_slack.posted() == []

    async def test_429s_past_the_budget_after_a_chunk_went_out_resume_after_it(
        self, fake_slack: FakeSlack, sleeps: Sleeps
    ) -> None:
        # The deliverer's own budget for scripted 429s (its waits are not real): unpaced,
        # and without the fake's flood control.
        deliverer = make_deliverer(fake_slack.api_base, sleeps, pacing=PacingConfig())
        fake_slack.flood.enabled = False
        fake_slack.fail_next(
            "chat.postMessage",
            None,
            *[SlackFailure.rate_limited(20)] * 2,
            SlackFailure.rate_limited(30),
        )
        text = long_text(8)
        with pytest.raises(DeliveryError, match="after 1 of") as caught:
            await deliverer.deliver(reply(text))
        error = caught.value
        assert (error.retryable, error.maybe_sent, error.delivered_chunks) == (True, False, 1)
        assert sleeps.waits == [20.0, 20.0]
        assert error.delivered_ids == tuple(fake_slack.posted_ids())
        ids = await deliverer.deliver(
            reply(text, delivered_chunks=1, delivered_ids=error.delivered_ids)
        )
        posted = [p["text"] for p in fake_slack.posted()]
        assert ids == fake_slack.posted_ids()
        assert "\n\n".join(posted) == to_mrkdwn(text.strip()), "every chunk once, in order"


class TestFailures:
    async def test_permanent_refusal_is_not_retried(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        fake_slack.fail_next("chat.postMessage", SlackFailure.api_error("not_in_channel"))
        with pytest.raises(DeliveryError, match="not_in_channel") as caught:
            await deliverer.deliver(reply("hello"))
        assert not caught.value.retryable

    @pytest.mark.parametrize(
        ("failure", "maybe_sent"),
        [
            (SlackFailure.api_error("service_unavailable"), False),
            (SlackFailure.api_error("internal_error"), True),
            (SlackFailure(503, "service_unavailable"), True),
        ],
    )
    async def test_transient_refusal_is_retryable_and_says_if_it_may_have_posted(
        self,
        deliverer: SlackDeliverer,
        fake_slack: FakeSlack,
        failure: SlackFailure,
        maybe_sent: bool,
    ) -> None:
        fake_slack.fail_next("chat.postMessage", failure)
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply("hello"))
        assert (caught.value.retryable, caught.value.maybe_sent) == (True, maybe_sent)

    async def test_transient_refusal_after_a_chunk_keeps_the_chunk(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        fake_slack.fail_next("chat.postMessage", None, SlackFailure.api_error("internal_error"))
        with pytest.raises(DeliveryError, match=r"after 1 of .* history") as caught:
            await deliverer.deliver(reply(long_text(8)))
        error = caught.value
        assert (error.retryable, error.maybe_sent, error.delivered_chunks) == (True, True, 1)

    async def test_unreachable_slack_is_retryable(self, sleeps: Sleeps) -> None:
        deliverer = make_deliverer(f"http://127.0.0.1:{free_port()}/api/", sleeps)
        with pytest.raises(DeliveryError, match="unreachable") as caught:
            await deliverer.deliver(reply("hello"))
        assert caught.value.retryable

    async def test_refused_formatting_falls_back_to_plain_text(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        fake_slack.fail_next("chat.postMessage", SlackFailure.api_error("invalid_blocks"))
        ids = await deliverer.deliver(reply("**Deploy** <today> & tomorrow"))
        (posted,) = fake_slack.posted()
        assert posted["text"] == "Deploy &lt;today&gt; &amp; tomorrow"
        assert posted["mrkdwn"] is False
        assert len(ids) == 1


class TestTyping:
    async def test_thread_status_while_a_turn_runs(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        await deliverer.send_typing(
            ChatTarget(platform="slack", chat_id="C0GENERAL", thread_id="1732799300.000400")
        )
        (call,) = fake_slack.calls_to("assistant.threads.setStatus")
        assert call.params == {
            "channel_id": "C0GENERAL",
            "thread_ts": "1732799300.000400",
            "status": TYPING_STATUS,
        }

    async def test_nothing_outside_threads(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        await deliverer.send_typing(ChatTarget(platform="slack", chat_id="D0ALICE01"))
        assert fake_slack.calls == []

    async def test_unsupported_status_is_not_asked_again(
        self, deliverer: SlackDeliverer, fake_slack: FakeSlack
    ) -> None:
        fake_slack.fail_next("assistant.threads.setStatus", SlackFailure.api_error("not_allowed"))
        target = ChatTarget(platform="slack", chat_id="C0GENERAL", thread_id="1.2")
        await deliverer.send_typing(target)
        await deliverer.send_typing(target)
        assert len(fake_slack.calls_to("assistant.threads.setStatus")) == 1
