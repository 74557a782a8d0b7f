"""Slack posts whose answer is lost are settled from the channel history, never duplicated.

slack_sdk against the fake Web API, which keeps messages with their metadata, serves
``conversations.history`` / ``conversations.replies``, and can post a message and then
answer late or drop the connection.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.base import BotConfig, DeliveryError
from adapters.messages import OutboundMessage
from adapters.slack import SlackDeliverer
from adapters.slack.mrkdwn import to_mrkdwn
from tests.fixtures.pacing import paced
from tests.fixtures.platform_servers.faults import CLIENT_TIMEOUT_SECONDS, AfterPost
from tests.fixtures.platform_servers.slack import BOT_TOKEN, FakeSlack, SlackFailure

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CHANNEL = "C0GENERAL"
DM = "D0ALICE01"


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture
def deliverer(fake_slack: FakeSlack) -> SlackDeliverer:
    config = BotConfig(
        platform="slack", token=BOT_TOKEN, api_base=fake_slack.api_base, pacing=paced("slack")
    )
    return SlackDeliverer(config, sleep=_no_sleep, timeout=CLIENT_TIMEOUT_SECONDS)


@pytest.fixture
def question(fake_slack: FakeSlack) -> str:
    """The channel message the reply answers (its thread is where the reply goes)."""
    return fake_slack.add_message(CHANNEL, "<@U0HUBBUB> when do we deploy?")


def long_text(paragraphs: int = 8) -> str:
    return "\n\n".join(f"Part {i}: " + "All good & *fine* here. " * 55 for i in range(paragraphs))


def reply(question: str, text: str = "Thursday.", **fields: Any) -> OutboundMessage:
    values: dict[str, Any] = {
        "platform": "slack",
        "chat_id": CHANNEL,
        "chat_type": "group",
        "text": text,
        "reply_to_message_id": f"{CHANNEL}:{question}",
        "delivery_id": "42",
    }
    return OutboundMessage(**(values | fields))


def again(message: OutboundMessage, error: DeliveryError, since: datetime) -> OutboundMessage:
    """The next attempt, as the delivery service builds it from what the error said."""
    return message.model_copy(
        update={
            "delivered_chunks": error.delivered_chunks,
            "delivered_ids": error.delivered_ids,
            "unsettled_since": since,
        }
    )


def bot_posts(fake: FakeSlack, channel: str = CHANNEL) -> list[dict[str, Any]]:
    return [m for m in fake.channel_messages(channel) if m.get("bot_id")]


@pytest.mark.parametrize(
    "fault",
    [AfterPost.answer_late(), AfterPost.drop_connection()],
    ids=["answered-after-the-timeout", "connection-dropped"],
)
async def test_a_post_whose_answer_is_lost_is_found_in_the_thread_and_not_posted_again(
    fake_slack: FakeSlack, deliverer: SlackDeliverer, question: str, fault: AfterPost
) -> None:
    message = reply(question)
    started = datetime.now(UTC)
    fake_slack.after_next("chat.postMessage", fault)
    with pytest.raises(DeliveryError, match="history") as caught:
        await deliverer.deliver(message)
    error = caught.value
    assert (error.maybe_sent, error.retryable, error.delivered_chunks) == (True, True, 0)
    (posted,) = bot_posts(fake_slack)

    ids = await deliverer.deliver(again(message, error, started))
    assert ids == [f"{CHANNEL}:{posted['ts']}"]
    assert len(bot_posts(fake_slack)) == 1
    (lookup,) = fake_slack.calls_to("conversations.replies")
    assert lookup.params["ts"] == question
    assert lookup.params["include_all_metadata"] in ("1", "true", True)


async def test_a_post_that_never_arrived_is_posted_once_after_the_lookup(
    fake_slack: FakeSlack, deliverer: SlackDeliverer, question: str
) -> None:
    ids = await deliverer.deliver(reply(question, unsettled_since=datetime.now(UTC)))
    (posted,) = bot_posts(fake_slack)
    assert ids == [f"{CHANNEL}:{posted['ts']}"]
    assert len(fake_slack.calls_to("conversations.replies")) == 1


async def test_a_dm_is_settled_from_the_channel_history(
    fake_slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    message = OutboundMessage(platform="slack", chat_id=DM, text="hi", delivery_id="43")
    first = await deliverer.deliver(message)  # a worker died before recording this
    ids = await deliverer.deliver(message.model_copy(update={"unsettled_since": datetime.now(UTC)}))
    assert ids == first
    assert len(bot_posts(fake_slack, DM)) == 1
    assert len(fake_slack.calls_to("conversations.history")) == 1


async def test_an_interrupted_long_reply_posts_only_its_missing_chunks(
    fake_slack: FakeSlack, deliverer: SlackDeliverer, question: str
) -> None:
    text = long_text()
    message = reply(question, text)
    started = datetime.now(UTC)
    fake_slack.after_next("chat.postMessage", None, AfterPost.drop_connection())
    with pytest.raises(DeliveryError) as caught:
        await deliverer.deliver(message)
    assert caught.value.delivered_chunks == 1
    assert len(bot_posts(fake_slack)) == 2, "the second chunk was posted, unknown to us"

    ids = await deliverer.deliver(again(message, caught.value, started))
    posts = bot_posts(fake_slack)
    assert ids == [f"{CHANNEL}:{p['ts']}" for p in posts]
    assert [p["metadata"]["event_payload"]["chunk"] for p in posts] == list(range(len(posts)))
    assert "\n\n".join(p["text"] for p in posts) == to_mrkdwn(text.strip())


async def test_look_alike_metadata_from_someone_else_does_not_count(
    fake_slack: FakeSlack, deliverer: SlackDeliverer, question: str
) -> None:
    fake_slack.add_message(CHANNEL, "Thursday.", user="U0OTHERBOT", thread_ts=question)
    lookalike = fake_slack.messages[CHANNEL][-1]
    lookalike["metadata"] = {
        "event_type": "hubbub_reply",
        "event_payload": {"delivery_id": "42", "chunk": 0},
    }
    await deliverer.deliver(reply(question, unsettled_since=datetime.now(UTC)))
    assert len(bot_posts(fake_slack)) == 1, "our reply was posted; the look-alike is not ours"


@pytest.mark.parametrize(
    ("failure", "retryable"),
    [(SlackFailure.rate_limited(1), True), (SlackFailure.api_error("missing_scope"), False)],
)
async def test_an_unreadable_history_posts_nothing_and_stays_unknown(
    fake_slack: FakeSlack,
    deliverer: SlackDeliverer,
    question: str,
    failure: SlackFailure,
    retryable: bool,
) -> None:
    fake_slack.fail_next("conversations.replies", failure)
    with pytest.raises(DeliveryError, match="history") as caught:
        await deliverer.deliver(reply(question, unsettled_since=datetime.now(UTC)))
    assert (caught.value.maybe_sent, caught.value.retryable) == (True, retryable)
    assert bot_posts(fake_slack) == []
