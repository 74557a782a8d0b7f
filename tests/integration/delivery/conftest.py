"""Fixtures of the delivery service tests: the local platforms and a world on them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import discord.http
import pytest

from adapters.discord import DiscordDeliverer
from adapters.slack import SlackDeliverer
from adapters.telegram import TelegramDeliverer
from tests.fixtures.outbox import TRIGGER, Platforms, World
from tests.fixtures.platform_servers.discord import running_fake_discord
from tests.fixtures.platform_servers.faults import CLIENT_TIMEOUT_SECONDS
from tests.fixtures.platform_servers.slack import FakeSlack, SlackServerThread
from tests.fixtures.platform_servers.telegram import FakeTelegram, TelegramServerThread


@pytest.fixture
def _restore_discord_globals() -> Iterator[None]:
    """Put back the REST URL the Discord deliverer pointed discord.py at."""
    rest = discord.http.Route.BASE
    yield
    discord.http.Route.BASE = rest


@pytest.fixture(scope="module")
def _telegram() -> Iterator[FakeTelegram]:
    with TelegramServerThread() as fake:
        yield fake


@pytest.fixture(scope="module")
def _slack() -> Iterator[FakeSlack]:
    with SlackServerThread() as fake:
        yield fake


@pytest.fixture
def platforms(_telegram: FakeTelegram, _slack: FakeSlack) -> Iterator[Platforms]:
    """The fakes, fresh for the test (a Discord of its own, which knows the trigger)."""
    _telegram.reset()
    _slack.reset()
    with running_fake_discord() as fake_discord:
        fake_discord.push("MESSAGE_CREATE", TRIGGER)
        yield Platforms(_telegram, fake_discord, _slack)
    _telegram.reset()
    _slack.reset()


@pytest.fixture
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each platform call gives up on its answer well before a late answer comes."""
    monkeypatch.setattr(TelegramDeliverer, "send_timeout_seconds", CLIENT_TIMEOUT_SECONDS)
    monkeypatch.setattr(DiscordDeliverer, "post_timeout_seconds", CLIENT_TIMEOUT_SECONDS)
    monkeypatch.setattr(SlackDeliverer, "api_timeout_seconds", CLIENT_TIMEOUT_SECONDS)


@pytest.fixture
def world(db_url: str, tmp_path: Path, platforms: Platforms) -> Iterator[World]:
    """The delivery service on a fresh database (both backends), bots on the fakes."""
    created = World(db_url, tmp_path, platforms)
    yield created
    created.close()
