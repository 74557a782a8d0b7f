"""The delivery service end to end: outbox rows, real deliverers, the local platforms.

What an operator sees (the outbox state, the log, ``/metrics``) and what the platform
received, when a send's answer is lost and when a worker dies between claiming a reply
and recording it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from agent_core.db.base import utcnow
from agent_core.db.engine import transaction
from agent_core.db.models import OutboxState
from agent_core.outbox.repository import OutboxRepository
from tests.fixtures.outbox import SLACK_CHANNEL, TELEGRAM_CHAT, Platforms, World
from tests.fixtures.pacing import LocalPacing
from tests.fixtures.platform_servers.discord import GENERAL_ID
from tests.fixtures.platform_servers.faults import AfterPost
from tests.fixtures.platform_servers.telegram import TelegramFailure

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("_restore_discord_globals")]


def counted(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def unsettled(platform: str, outcome: str) -> float:
    return counted("hubbub_delivery_unsettled_total", platform=platform, outcome=outcome)


def deliveries(platform: str, outcome: str) -> float:
    return counted("hubbub_deliveries_total", platform=platform, outcome=outcome)


def posts(platforms: Platforms, platform: str, chat: str) -> int:
    """How many messages the bot posted in ``chat``."""
    if platform == "telegram":
        return len(platforms.telegram.sent_messages(chat))
    if platform == "discord":
        return len(platforms.discord.sent_messages(chat))
    return len([m for m in platforms.slack.channel_messages(chat) if m.get("bot_id")])


def warnings_about(caplog: pytest.LogCaptureFixture, outbox_id: int) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and getattr(r, "outbox_id", None) == outbox_id
    ]


@pytest.mark.usefixtures("short_timeouts")
class TestLostAnswers:
    def test_telegram_slow_send_is_marked_unknown_and_never_sent_again(
        self, world: World, platforms: Platforms, caplog: pytest.LogCaptureFixture
    ) -> None:
        outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT)
        before = (deliveries("telegram", "unknown"), unsettled("telegram", "unknown"))
        platforms.telegram.after_next("sendMessage", AfterPost.answer_late())

        assert world.service.deliver(outbox_id) is False
        world.make_due(outbox_id)
        assert world.service.deliver(outbox_id) is False, "a redelivered task sends nothing"

        assert len(platforms.telegram.sent_messages()) == 1
        entry = world.entry(outbox_id)
        assert entry.state == OutboxState.UNKNOWN
        assert entry.last_error is not None
        assert "may or may not" in entry.last_error
        assert deliveries("telegram", "unknown") == before[0] + 1
        assert unsettled("telegram", "unknown") == before[1] + 1
        (warning,) = warnings_about(caplog, outbox_id)
        assert getattr(warning, "platform", None) == "telegram"
        assert "unknown" in warning.getMessage()

    def test_discord_lost_answer_is_settled_by_the_nonce(
        self, world: World, platforms: Platforms
    ) -> None:
        outbox_id = world.queue_reply("discord", GENERAL_ID)
        before = (unsettled("discord", "settling"), unsettled("discord", "settled"))
        platforms.discord.after_next(AfterPost.drop_connection())

        assert world.service.deliver(outbox_id) is False
        entry = world.entry(outbox_id)
        assert (entry.state, entry.unsettled_since is not None) == (OutboxState.PENDING, True)
        world.make_due(outbox_id)
        assert world.service.deliver(outbox_id) is True

        (sent,) = platforms.discord.sent_messages(GENERAL_ID)
        first, second = platforms.discord.attempts
        assert first["body"]["nonce"] == second["body"]["nonce"]
        entry = world.entry(outbox_id)
        assert (entry.state, entry.platform_message_ids) == (OutboxState.SENT, [sent.message["id"]])
        assert entry.unsettled_since is None
        assert unsettled("discord", "settling") == before[0] + 1
        assert unsettled("discord", "settled") == before[1] + 1

    def test_slack_lost_answer_is_settled_from_the_thread(
        self, world: World, platforms: Platforms
    ) -> None:
        outbox_id = world.queue_reply("slack", SLACK_CHANNEL)
        platforms.slack.after_next("chat.postMessage", AfterPost.answer_late())

        assert world.service.deliver(outbox_id) is False
        world.make_due(outbox_id)
        assert world.service.deliver(outbox_id) is True

        posts = [m for m in platforms.slack.channel_messages(SLACK_CHANNEL) if m.get("bot_id")]
        assert len(posts) == 1
        assert len(platforms.slack.calls_to("conversations.replies")) == 1
        entry = world.entry(outbox_id)
        assert entry.state == OutboxState.SENT
        assert entry.platform_message_ids == [f"{SLACK_CHANNEL}:{posts[0]['ts']}"]

    def test_a_refusal_mid_reply_resumes_after_the_delivered_chunks(
        self, world: World, platforms: Platforms, local_pacing: LocalPacing
    ) -> None:
        text = "\n\n".join([f"Part {i}. " + "All good here. " * 150 for i in range(3)])
        outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT, text)
        platforms.telegram.fail_next("sendMessage", None, TelegramFailure.rate_limited(300))

        assert world.service.deliver(outbox_id) is False
        entry = world.entry(outbox_id)
        assert (entry.state, entry.delivered_chunks) == (OutboxState.PENDING, 1)
        assert entry.next_attempt_at is not None
        assert entry.next_attempt_at - utcnow() > timedelta(seconds=250), "Telegram's wait"
        world.make_due(outbox_id)
        local_pacing.advance(300)  # the chat is held back for Telegram's wait, too
        assert world.service.deliver(outbox_id) is True

        sent = platforms.telegram.sent_messages()
        assert len(sent) >= 2
        entry = world.entry(outbox_id)
        assert entry.state == OutboxState.SENT
        assert entry.platform_message_ids == [f"{TELEGRAM_CHAT}:{s['_message_id']}" for s in sent]
        assert "".join(s["_visible"] for s in sent).count("Part ") == 3, "each part once"


class TestInterruptedWorker:
    @pytest.mark.parametrize("platform", ["discord", "slack"])
    def test_the_reply_is_settled_and_not_sent_again(
        self, world: World, platforms: Platforms, platform: str
    ) -> None:
        chat = GENERAL_ID if platform == "discord" else SLACK_CHANNEL
        outbox_id = world.queue_reply(platform, chat)
        delivered = world.die_mid_send(outbox_id)
        before = unsettled(platform, "interrupted")

        assert world.service.requeue_stale_claims() == 1
        assert unsettled(platform, "interrupted") == before + 1
        entry = world.entry(outbox_id)
        assert (entry.state, entry.unsettled_since is not None) == (OutboxState.PENDING, True)
        assert world.service.deliver(outbox_id) is True

        assert world.entry(outbox_id).platform_message_ids == delivered
        if platform == "discord":
            assert len(platforms.discord.sent_messages()) == 1
        else:
            posts = [m for m in platforms.slack.channel_messages(chat) if m.get("bot_id")]
            assert len(posts) == 1

    @pytest.mark.parametrize("platform", ["telegram", "discord", "slack"])
    def test_a_deleted_draft_replaced_before_the_worker_died_is_edited_not_posted_again(
        self, world: World, platforms: Platforms, platform: str
    ) -> None:
        chat, gone = {
            "telegram": (TELEGRAM_CHAT, f"{TELEGRAM_CHAT}:4999"),
            "discord": (GENERAL_ID, "1320000000000009999"),
            "slack": (SLACK_CHANNEL, f"{SLACK_CHANNEL}:1732799000.000100"),
        }[platform]
        outbox_id = world.queue_reply(platform, chat)
        world.streamed_into(outbox_id, [gone])  # a draft someone deleted
        (replacement,) = world.die_mid_send(outbox_id)
        assert world.streamed(outbox_id) == [replacement], "recorded in the deleted one's place"
        world.service.requeue_stale_claims()

        assert world.service.deliver(outbox_id) is True
        entry = world.entry(outbox_id)
        assert (entry.state, entry.platform_message_ids) == (OutboxState.SENT, [replacement])
        assert posts(platforms, platform, chat) == 1, "the replacement was edited, not posted again"

    def test_unknown_replies_are_listed_for_the_operator(
        self, world: World, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from typer.testing import CliRunner

        from gateway.cli import app

        outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT)
        world.die_mid_send(outbox_id)
        world.service.requeue_stale_claims()
        world.service.deliver(outbox_id)
        sent = world.queue_reply("telegram", TELEGRAM_CHAT)
        world.service.deliver(sent)
        for key, value in world.env.items():
            monkeypatch.setenv(key, value)
        # The CLI sets up logging on a stream CliRunner closes after each call.
        monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)

        listed = CliRunner().invoke(app, ["sessions", "deliveries"])
        assert listed.exit_code == 0, listed.output
        assert f"#{outbox_id} telegram:{TELEGRAM_CHAT}" in listed.output
        assert "unknown after 2 attempt(s)" in listed.output
        assert f"#{sent} " not in listed.output
        wrong = CliRunner().invoke(app, ["sessions", "deliveries", "--state", "lost"])
        assert wrong.exit_code == 2

    def test_telegram_reply_is_unknown_and_not_sent_again(
        self, world: World, platforms: Platforms, caplog: pytest.LogCaptureFixture
    ) -> None:
        outbox_id = world.queue_reply("telegram", TELEGRAM_CHAT)
        world.die_mid_send(outbox_id)
        world.service.requeue_stale_claims()

        assert world.service.deliver(outbox_id) is False
        assert world.entry(outbox_id).state == OutboxState.UNKNOWN
        assert len(platforms.telegram.sent_messages()) == 1
        assert any("unknown" in r.getMessage() for r in warnings_about(caplog, outbox_id))

    def test_web_chat_reply_is_simply_delivered(self, world: World) -> None:
        outbox_id = world.queue_reply("webchat", "visitor-1")
        with transaction(world.factory) as db:
            OutboxRepository.from_session(db).claim(outbox_id, claim_seconds=0)
        world.service.requeue_stale_claims()
        assert world.service.deliver(outbox_id) is True
        assert world.entry(outbox_id).state == OutboxState.SENT
