"""Choosing webhook or polling, and refusing unsafe webhook settings."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.base import BotConfig
from adapters.telegram import create_listener, create_webhook
from adapters.telegram.options import (
    DEFAULT_API_BASE,
    TelegramConfigError,
    api_base,
    bot_path_id,
    receive_options,
)
from adapters.telegram.polling import PollingListener
from adapters.telegram.registration import WebhookRegistration
from adapters.telegram.webhook import TelegramWebhook
from agent_core.config import Settings
from gateway.supervisor import bot_path_id as gateway_bot_path_id
from workers.bots import env_bot_config


async def _sink(_: Any) -> None:
    raise AssertionError("nothing is received here")


def config(**extra: Any) -> BotConfig:
    return BotConfig(platform="telegram", token="1:abc", extra=extra)


class TestReceiveOptions:
    def test_polling_without_public_url(self) -> None:
        assert receive_options(config()).mode == "polling"
        assert receive_options(config(mode="auto", public_url=None)).mode == "polling"

    def test_webhook_with_public_url_and_secret(self) -> None:
        options = receive_options(
            config(public_url="https://hub.example.com/", webhook_secret="s3cr3t_-X")
        )
        assert options.mode == "webhook"
        assert options.webhook_url == "https://hub.example.com/webhooks/telegram/default"
        assert options.secret_token == "s3cr3t_-X"

    def test_polling_can_be_forced_despite_a_public_url(self) -> None:
        options = receive_options(config(mode="polling", public_url="https://hub.example.com"))
        assert options.mode == "polling"

    def test_webhook_url_names_tenant_bots_like_the_gateway_route(self) -> None:
        bot = BotConfig(
            platform="telegram",
            bot_name="support",
            tenant_id="acme",
            token="1:abc",
            extra={"public_url": "https://h.example", "webhook_secret": "s"},
        )
        assert bot_path_id(bot) == gateway_bot_path_id(bot) == "acme.support"
        assert (
            receive_options(bot).webhook_url == "https://h.example/webhooks/telegram/acme.support"
        )
        default = config()
        assert bot_path_id(default) == gateway_bot_path_id(default) == "default"

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            ({"public_url": "https://h.example"}, "without a secret token"),
            ({"public_url": "https://h.example", "webhook_secret": ""}, "without a secret token"),
            ({"public_url": "https://h.example", "webhook_secret": "has space"}, "A-Z, a-z, 0-9"),
            ({"public_url": "https://h.example", "webhook_secret": "x" * 257}, "1-256"),
            ({"mode": "webhook"}, "HUBBUB_PUBLIC_URL"),
            ({"mode": "sometimes"}, "HUBBUB_TELEGRAM_MODE"),
        ],
    )
    def test_unsafe_or_impossible_webhook_settings_are_refused(
        self, extra: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(TelegramConfigError, match=message):
            receive_options(config(**extra))
        with pytest.raises(TelegramConfigError, match=message):
            create_webhook(config(**extra), _sink)

    def test_api_base(self) -> None:
        assert api_base(config()) == DEFAULT_API_BASE
        local = BotConfig(platform="telegram", token="1:a", api_base="http://127.0.0.1:8081/bot")
        assert api_base(local) == "http://127.0.0.1:8081/bot"


class TestFactories:
    def test_polling_mode(self) -> None:
        assert create_webhook(config(), _sink) is None
        assert isinstance(create_listener(config(), _sink), PollingListener)

    def test_webhook_mode(self) -> None:
        bot = config(public_url="https://h.example", webhook_secret="s")
        assert isinstance(create_webhook(bot, _sink), TelegramWebhook)
        assert isinstance(create_listener(bot, _sink), WebhookRegistration)

    def test_a_bot_without_token_is_refused(self) -> None:
        with pytest.raises(TelegramConfigError, match="no token"):
            create_listener(BotConfig(platform="telegram"), _sink)


class TestEnvironmentSettings:
    """``HUBBUB_*`` settings reach the adapter through ``env_bot_config``."""

    def build(self, **values: Any) -> BotConfig:
        settings = Settings.model_validate({"telegram_token": "1:abc"} | values)
        bot = env_bot_config(settings, "telegram")
        assert bot is not None
        return bot

    def test_public_url_and_secret_mean_webhook(self) -> None:
        bot = self.build(public_url="https://h.example", telegram_webhook_secret="s3cret")
        options = receive_options(bot)
        assert (options.mode, options.secret_token) == ("webhook", "s3cret")

    def test_mode_polling_wins_over_a_public_url(self) -> None:
        bot = self.build(public_url="https://h.example", telegram_mode="polling")
        assert receive_options(bot).mode == "polling"

    def test_api_base_and_token(self) -> None:
        bot = self.build(telegram_api_base="http://127.0.0.1:8081/bot")
        assert (bot.token, api_base(bot)) == ("1:abc", "http://127.0.0.1:8081/bot")
