"""The Telegram adapter's real PTB client against the local fake Bot API (no gateway)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram.error import BadRequest, Conflict, InvalidToken

from adapters.base import RETRY_LATER_SECONDS, BotConfig, DeliveryError, WebhookVerificationError
from adapters.messages import ChatTarget, InboundMessage, OutboundMessage
from adapters.telegram import TelegramDeliverer, create_webhook
from adapters.telegram import inbound as inbound_module
from adapters.telegram.options import receive_options
from adapters.telegram.polling import PollingListener
from adapters.telegram.registration import WebhookRegistration
from adapters.telegram.webhook import TelegramWebhook
from tests.fixtures.pacing import LocalPacing, paced
from tests.fixtures.platform_servers.telegram import (
    TOKEN,
    FakeTelegram,
    TelegramFailure,
    TelegramServerThread,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PAYLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "payloads" / "telegram"
SECRET = "hook-Secret_123"
GROUP = "-1009876543210"


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


@pytest.fixture
def telegram(_server: FakeTelegram) -> Iterator[FakeTelegram]:
    _server.reset()
    yield _server
    _server.reset()


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def fresh(update: dict[str, Any]) -> dict[str, Any]:
    """The update without its id, so the fake numbers it after the ones queued before."""
    return {k: v for k, v in update.items() if k != "update_id"}


def bot_config(fake: FakeTelegram, **extra: Any) -> BotConfig:
    return BotConfig(
        platform="telegram",
        token=TOKEN,
        api_base=fake.api_base,
        extra=extra,
        pacing=paced("telegram"),
    )


def reply(text: str, chat_id: str = "111111111", **kw: Any) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=chat_id, text=text, delivery_id="1", **kw)


async def eventually(predicate: Callable[[], Any], what: str, within: float = 10) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not (value := predicate()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return value


class Recorder:
    """A sink that keeps what it is given, and can fail like an unavailable database."""

    def __init__(self) -> None:
        self.items: list[InboundMessage] = []
        self.failures = 0

    async def __call__(self, inbound: InboundMessage) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("database unavailable")
        self.items.append(inbound)


@pytest.fixture
async def deliverer(telegram: FakeTelegram) -> Any:
    async with TelegramDeliverer(bot_config(telegram)) as d:
        yield d


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the deliverer's back-off sleeps and skip the waiting itself."""
    recorded: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)
        await real_sleep(0)

    # The deliverer's module-level ``asyncio`` is the asyncio module: patch it for this test.
    monkeypatch.setattr("adapters.telegram.deliverer.asyncio.sleep", fake_sleep)
    return recorded


LONG = "\n\n".join(["A paragraph of a long answer that keeps going. " * 12] * 12)


class TestDelivery:
    async def test_private_reply_is_html_and_quotes_nothing(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        ids = await deliverer.deliver(
            reply("**Done** — `x < y` & fine", reply_to_message_id="111111111:1365")
        )
        (sent,) = telegram.sent_messages()
        assert sent["parse_mode"] == "HTML"
        assert sent["text"] == "<b>Done</b> — <code>x &lt; y</code> &amp; fine"
        assert "reply_parameters" not in sent
        assert "message_thread_id" not in sent
        assert ids == [f"111111111:{sent['_message_id']}"]

    async def test_group_reply_quotes_the_trigger_once_and_stays_in_the_topic(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        ids = await deliverer.deliver(
            reply(
                LONG,
                chat_id=GROUP,
                chat_type="group",
                thread_id="42",
                reply_to_message_id=f"{GROUP}:77",
            )
        )
        sent = telegram.sent_messages()
        assert len(sent) == len(ids) == 2
        assert sent[0]["reply_parameters"] == {
            "message_id": 77,
            "allow_sending_without_reply": True,
        }
        assert "reply_parameters" not in sent[1]
        assert [s["message_thread_id"] for s in sent] == ["42", "42"]
        assert ids == [f"{GROUP}:{s['_message_id']}" for s in sent]

    async def test_long_reply_with_code_is_split_and_telegram_accepts_every_chunk(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        code = "\n".join(f"if (a[{i}] < b && c > d) {{ return '<{i}>'; }}" for i in range(250))
        text = f"Intro with **bold** text.\n\n```js\n{code}\n```\n\n{LONG}\n\nПока! 👋"  # noqa: RUF001
        ids = await deliverer.deliver(reply(text))
        sent = telegram.sent_messages()
        assert len(ids) == len(sent) >= 4
        assert len(telegram.calls("sendMessage")) == len(sent), "no chunk was refused"
        visible = "".join(s["_visible"] for s in sent)
        assert visible.count("return") == 250
        assert visible.endswith("Пока! 👋")
        assert all(s["parse_mode"] == "HTML" for s in sent)

    async def test_429_is_waited_out_and_the_chunk_sent_once(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer, sleeps: list[float]
    ) -> None:
        telegram.fail_next("sendMessage", TelegramFailure.rate_limited(3))
        ids = await deliverer.deliver(reply("hello"))
        assert sleeps == [3.0]
        assert len(telegram.calls("sendMessage")) == 2
        assert len(telegram.sent_messages()) == len(ids) == 1

    async def test_429_beyond_the_budget_before_anything_is_sent_is_retryable(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer, sleeps: list[float]
    ) -> None:
        telegram.fail_next("sendMessage", TelegramFailure.rate_limited(300))
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply("hello"))
        assert caught.value.retryable is True
        assert caught.value.retry_after == 300
        assert telegram.sent_messages() == []
        assert sleeps == []

    async def test_a_refusal_after_a_chunk_went_out_says_what_was_delivered(
        self,
        telegram: FakeTelegram,
        deliverer: TelegramDeliverer,
        sleeps: list[float],
        local_pacing: LocalPacing,
    ) -> None:
        telegram.fail_next("sendMessage", None, TelegramFailure.rate_limited(300))
        with pytest.raises(DeliveryError, match="after 1 of 2 chunks") as caught:
            await deliverer.deliver(reply(LONG))
        (first,) = telegram.sent_messages()
        error = caught.value
        assert (error.retryable, error.maybe_sent, error.delivered_chunks) == (True, False, 1)
        assert error.delivered_ids == (f"111111111:{first['_message_id']}",)
        with pytest.raises(DeliveryError, match="after 1 of 2 chunks"):
            await deliverer.deliver(
                reply(LONG, delivered_chunks=1, delivered_ids=error.delivered_ids)
            )
        assert len(telegram.calls("sendMessage")) == 2, "the chat is held back: nothing sent"
        local_pacing.advance(300)  # the retry comes after Telegram's 300 s
        ids = await deliverer.deliver(
            reply(LONG, delivered_chunks=1, delivered_ids=error.delivered_ids)
        )
        first_again, second = telegram.sent_messages()
        assert first_again == first, "the delivered chunk is not sent again"
        assert ids == [*error.delivered_ids, f"111111111:{second['_message_id']}"]

    @pytest.mark.parametrize(
        ("failure", "retryable", "maybe_sent"),
        [
            (TelegramFailure.server_error(), False, True),
            (TelegramFailure.forbidden(), False, False),
            (TelegramFailure(400, "Bad Request: chat not found"), False, False),
        ],
    )
    async def test_first_chunk_errors(
        self,
        telegram: FakeTelegram,
        deliverer: TelegramDeliverer,
        failure: TelegramFailure,
        retryable: bool,
        maybe_sent: bool,
    ) -> None:
        telegram.fail_next("sendMessage", failure)
        with pytest.raises(DeliveryError) as caught:
            await deliverer.deliver(reply("hi"))
        assert (caught.value.retryable, caught.value.maybe_sent) == (retryable, maybe_sent)
        assert telegram.sent_messages() == []

    async def test_parse_error_falls_back_to_plain_text(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        telegram.fail_next("sendMessage", TelegramFailure.cant_parse())
        ids = await deliverer.deliver(reply("**bold** and [a link](https://e.com)"))
        refused, sent = telegram.calls("sendMessage")
        assert refused.params["parse_mode"] == "HTML"
        assert "parse_mode" not in sent.params
        assert sent.params["text"] == "bold and a link (https://e.com)"
        assert len(ids) == 1

    async def test_migrated_group_gets_the_reply_at_its_new_id(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        telegram.fail_next("sendMessage", TelegramFailure.migrated(-1005555555555))
        ids = await deliverer.deliver(reply("hi all", chat_id="-4012345678", chat_type="group"))
        (sent,) = telegram.sent_messages()
        assert sent["chat_id"] == "-1005555555555"
        assert ids == [f"-1005555555555:{sent['_message_id']}"]

    async def test_typing_is_kept_up_in_the_topic_until_the_reply(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        deliverer.typing_refresh_seconds = 0.01
        target = ChatTarget(platform="telegram", chat_id=GROUP, thread_id="42")
        await deliverer.send_typing(target)
        await eventually(lambda: len(telegram.calls("sendChatAction")) >= 3, "typing refreshes")
        actions = telegram.calls("sendChatAction")
        assert {
            (c.params["chat_id"], c.params["action"], c.params["message_thread_id"])
            for c in actions
        } == {(GROUP, "typing", "42")}
        await deliverer.deliver(reply("done", chat_id=GROUP, chat_type="group", thread_id="42"))
        assert deliverer.typing_chats == ()
        count = len(telegram.calls("sendChatAction"))
        await asyncio.sleep(0.05)
        assert len(telegram.calls("sendChatAction")) == count

    async def test_typing_stops_by_itself(
        self, telegram: FakeTelegram, deliverer: TelegramDeliverer
    ) -> None:
        deliverer.typing_refresh_seconds = 0.01
        deliverer.typing_max_seconds = 0.05
        await deliverer.send_typing(ChatTarget(platform="telegram", chat_id="5"))
        await eventually(lambda: deliverer.typing_chats == (), "typing to stop")

    async def test_a_refused_token_fails_initialize(self, telegram: FakeTelegram) -> None:
        config = BotConfig(platform="telegram", token="999:wrong", api_base=telegram.api_base)
        with pytest.raises(InvalidToken):
            async with TelegramDeliverer(config):
                pass


@pytest.fixture
async def webhook(telegram: FakeTelegram) -> Any:
    config = bot_config(telegram, public_url="https://hub.example.com", webhook_secret=SECRET)
    recorder = Recorder()
    handler = create_webhook(config, recorder)
    assert isinstance(handler, TelegramWebhook)
    await handler.initialize()
    yield handler, recorder
    await handler.shutdown()


def post(handler: TelegramWebhook, body: Any, secret: str | None = SECRET) -> Awaitable[Any]:
    headers = {"content-type": "application/json"}
    if secret is not None:
        headers["x-telegram-bot-api-secret-token"] = secret
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return handler.handle(headers, raw)


class TestWebhook:
    @pytest.mark.parametrize("secret", [None, "", "wrong", SECRET + "x", SECRET.lower()])
    async def test_missing_or_wrong_secret_is_403_and_nothing_is_stored(
        self, webhook: tuple[TelegramWebhook, Recorder], secret: str | None
    ) -> None:
        handler, recorder = webhook
        with pytest.raises(WebhookVerificationError) as caught:
            await post(handler, payload("private_text"), secret)
        assert caught.value.status_code == 403
        assert recorder.items == []

    async def test_verified_update_is_stored_and_answered_200(
        self, webhook: tuple[TelegramWebhook, Recorder]
    ) -> None:
        handler, recorder = webhook
        response = await post(handler, payload("group_mention"))
        assert response.status == 200
        (inbound,) = recorder.items
        assert (inbound.chat_id, inbound.addressed) == (GROUP, True)

    async def test_the_same_update_twice_is_stored_once(
        self, webhook: tuple[TelegramWebhook, Recorder]
    ) -> None:
        handler, recorder = webhook
        for _ in range(3):
            assert (await post(handler, payload("edited_message"))).status == 200
        assert len(recorder.items) == 1

    @pytest.mark.parametrize(
        "body",
        [
            b"{not json",
            b"\xff\xfe",
            json.dumps([1, 2]).encode(),
            json.dumps({"message": {}}).encode(),
        ],
    )
    async def test_malformed_bodies_are_400(
        self, webhook: tuple[TelegramWebhook, Recorder], body: bytes
    ) -> None:
        handler, recorder = webhook
        response = await post(handler, body)
        assert response.status == 400
        assert recorder.items == []

    @pytest.mark.parametrize(
        "update",
        [
            {"update_id": 10, "message": "not an object"},
            {"update_id": 11, "message": {"message_id": 1}},
            {"update_id": 12, "edited_message": {"message_id": 1, "date": 0, "chat": {"id": 1}}},
        ],
    )
    async def test_updates_that_do_not_parse_are_400(
        self, webhook: tuple[TelegramWebhook, Recorder], update: dict[str, Any]
    ) -> None:
        handler, recorder = webhook
        assert (await post(handler, update)).status == 400
        assert recorder.items == []

    async def test_an_unreadable_message_is_acknowledged_and_skipped(
        self, webhook: tuple[TelegramWebhook, Recorder]
    ) -> None:
        handler, recorder = webhook
        odd = payload("private_text")
        odd["message"]["text"] = 5
        odd["message"]["entities"] = [{"offset": 0, "length": 1, "type": "mention"}]
        assert (await post(handler, odd)).status == 200, "a retry would fail the same way"
        assert recorder.items == []

    async def test_storage_failure_is_503_and_the_retry_is_stored(
        self, webhook: tuple[TelegramWebhook, Recorder], caplog: pytest.LogCaptureFixture
    ) -> None:
        handler, recorder = webhook
        recorder.failures = 1
        with caplog.at_level(logging.ERROR):
            refused = await post(handler, payload("private_text"))
        assert (refused.status, refused.retry_after) == (503, RETRY_LATER_SECONDS)
        assert "Telegram will retry" in caplog.text
        assert (await post(handler, payload("private_text"))).status == 200
        assert len(recorder.items) == 1

    async def test_updates_without_a_message_are_acknowledged(
        self, webhook: tuple[TelegramWebhook, Recorder]
    ) -> None:
        handler, recorder = webhook
        for name in ("my_chat_member", "channel_post", "sticker", "own_message"):
            assert (await post(handler, payload(name))).status == 200
        assert recorder.items == []

    async def test_identity_is_learnt_late_when_telegram_was_down_at_start(
        self, telegram: FakeTelegram
    ) -> None:
        telegram.fail_next("getMe", TelegramFailure.server_error())
        recorder = Recorder()
        config = bot_config(telegram, public_url="https://h.example", webhook_secret=SECRET)
        handler = TelegramWebhook(config, recorder, receive_options(config))
        await handler.initialize()
        try:
            assert (await post(handler, payload("group_mention"))).status == 200
            assert recorder.items[0].addressed is True
        finally:
            await handler.shutdown()


async def run_until(listener: Any, predicate: Callable[[], Any], what: str) -> None:
    task = asyncio.create_task(listener.run())
    try:
        await eventually(lambda: predicate() or task.done(), what)
        if task.done():
            task.result()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class TestPolling:
    async def test_updates_reach_the_sink_in_order_and_are_confirmed(
        self, telegram: FakeTelegram
    ) -> None:
        telegram.webhook = {"url": "https://old.example/hook"}
        names = ["group_unaddressed", "group_mention", "edited_message", "sticker", "non_latin"]
        ids = [telegram.push_update(fresh(payload(name))) for name in names]
        recorder = Recorder()
        listener = PollingListener(bot_config(telegram), recorder, poll_timeout=1)
        await run_until(
            listener,
            lambda: len(recorder.items) == 4 and not telegram.pending_updates(),
            "4 messages",
        )
        methods = [c.method for c in telegram.calls()]
        assert methods.index("deleteWebhook") < methods.index("getUpdates")
        assert "setMyCommands" in methods
        assert [m.event for m in recorder.items] == ["message", "message", "edit", "message"]
        assert recorder.items[-1].text.startswith("Привет")
        polls = telegram.calls("getUpdates")
        assert polls[0].params.get("offset") is None
        assert polls[0].params["allowed_updates"] == ["message", "edited_message"]
        assert polls[-1].params["offset"] == str(ids[-1] + 1)

    async def test_an_update_that_failed_to_store_is_fetched_again(
        self, telegram: FakeTelegram
    ) -> None:
        update_id = telegram.push_update(fresh(payload("private_text")))
        recorder = Recorder()
        recorder.failures = 1
        listener = PollingListener(bot_config(telegram), recorder, poll_timeout=1)
        with pytest.raises(RuntimeError, match="database unavailable"):
            await listener.run()
        assert telegram.pending_updates() == [update_id]
        await run_until(listener, lambda: recorder.items, "the stored update")
        assert len(recorder.items) == 1

    async def test_an_odd_update_does_not_block_the_ones_after_it(
        self, telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        odd = fresh(payload("group_mention"))
        odd["message"]["text"] = 5
        telegram.push_update(odd)
        broken = fresh(payload("group_unaddressed"))
        broken["message"]["text"] = "this one breaks the conversion"
        telegram.push_update(broken)

        real = inbound_module.to_inbound

        def to_inbound(update: Any, *args: Any) -> Any:
            if update.message.text == "this one breaks the conversion":
                raise ValueError("a bug in the conversion")
            return real(update, *args)

        monkeypatch.setattr("adapters.telegram.receiver.to_inbound", to_inbound)
        telegram.push_update(fresh(payload("private_text")))
        recorder = Recorder()
        listener = PollingListener(bot_config(telegram), recorder, poll_timeout=1)
        await run_until(
            listener, lambda: recorder.items and not telegram.pending_updates(), "the good update"
        )
        assert [m.chat_id for m in recorder.items] == ["111111111"]

    async def test_short_network_trouble_is_retried(self, telegram: FakeTelegram) -> None:
        telegram.fail_next(
            "getUpdates", TelegramFailure.server_error(), TelegramFailure.rate_limited(1)
        )
        telegram.push_update(fresh(payload("private_text")))
        recorder = Recorder()
        listener = PollingListener(bot_config(telegram), recorder, poll_timeout=1)
        await run_until(listener, lambda: recorder.items, "the update after two failures")
        assert len(telegram.calls("getUpdates")) >= 3

    async def test_another_poller_is_a_conflict_for_the_supervisor(
        self, telegram: FakeTelegram
    ) -> None:
        # Every poll meets the other poller (also one retried after a slow start on a
        # loaded machine), as it would while that poller runs.
        conflict = TelegramFailure(409, "Conflict: terminated by other getUpdates request")
        telegram.fail_next("getUpdates", *[conflict] * 20)
        listener = PollingListener(bot_config(telegram), Recorder(), poll_timeout=1)
        with pytest.raises(Conflict):
            await listener.run()

    @pytest.mark.parametrize("privacy_mode", [True, False])
    async def test_privacy_mode_is_reported(
        self, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture, privacy_mode: bool
    ) -> None:
        telegram.privacy_mode = privacy_mode
        listener = PollingListener(bot_config(telegram), Recorder(), poll_timeout=1)
        with caplog.at_level(logging.WARNING):
            await run_until(listener, lambda: telegram.calls("getUpdates"), "the first poll")
        assert ("privacy mode is on for @gw_bot" in caplog.text) is privacy_mode

    async def test_cancellation_closes_cleanly(self, telegram: FakeTelegram) -> None:
        listener = PollingListener(bot_config(telegram), Recorder(), poll_timeout=1)
        task = asyncio.create_task(listener.run())
        await eventually(lambda: telegram.calls("getUpdates"), "the first poll")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


class TestWebhookRegistration:
    def listener(self, fake: FakeTelegram, interval: float = 300) -> WebhookRegistration:
        config = bot_config(fake, public_url="https://hub.example.com/", webhook_secret=SECRET)
        return WebhookRegistration(
            config, Recorder(), receive_options(config), check_interval=interval
        )

    async def test_sets_the_webhook_with_the_secret(self, telegram: FakeTelegram) -> None:
        await run_until(
            self.listener(telegram), lambda: telegram.calls("setMyCommands"), "registration"
        )
        (call,) = telegram.calls("setWebhook")
        assert call.params["url"] == "https://hub.example.com/webhooks/telegram/default"
        assert call.params["secret_token"] == SECRET
        assert call.params["allowed_updates"] == ["message", "edited_message"]
        assert call.params["drop_pending_updates"] == "false"
        commands = telegram.calls("setMyCommands")[0].params["commands"]
        assert {c["command"] for c in commands} >= {"help", "new", "usage"}

    async def test_puts_the_webhook_back_and_reports_delivery_errors(
        self, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
    ) -> None:
        listener = self.listener(telegram, interval=0.01)
        task = asyncio.create_task(listener.run())
        try:
            await eventually(lambda: telegram.calls("setWebhook"), "registration")
            telegram.webhook = {"url": "https://someone-else.example/hook"}
            telegram.webhook_error = (
                1732800000,
                "Wrong response from the webhook: 502 Bad Gateway",
            )
            with caplog.at_level(logging.WARNING):
                await eventually(lambda: len(telegram.calls("setWebhook")) == 2, "re-registration")
                await eventually(
                    lambda: "failed webhook deliveries" in caplog.text, "the error log"
                )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert telegram.webhook["url"] == "https://hub.example.com/webhooks/telegram/default"

    async def test_a_failed_registration_raises_for_the_supervisor(
        self, telegram: FakeTelegram
    ) -> None:
        telegram.fail_next(
            "setWebhook",
            TelegramFailure(400, "Bad Request: bad webhook: HTTPS url must be provided"),
        )
        with pytest.raises(BadRequest, match=r"(?i)https url must be provided"):
            await self.listener(telegram).run()
