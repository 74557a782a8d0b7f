"""Fixtures shared by the adapter integration tests: the fake Slack and the fake Discord."""

from __future__ import annotations

from collections.abc import Iterator

import discord.gateway
import discord.http
import pytest

from tests.fixtures.platform_servers.discord import FakeDiscord, running_fake_discord
from tests.fixtures.platform_servers.slack import FakeSlack, SlackServerThread, fresh


@pytest.fixture
def anyio_backend() -> str:
    """The adapters run on asyncio (discord.py, slack-bolt, python-telegram-bot)."""
    return "asyncio"


@pytest.fixture(scope="module")
def _slack_server() -> Iterator[FakeSlack]:
    with SlackServerThread() as fake:
        yield fake


@pytest.fixture
def fake_slack(_slack_server: FakeSlack) -> Iterator[FakeSlack]:
    """The module's fake Slack, reset for each test with no Socket Mode session open."""
    yield from fresh(_slack_server)


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    """A fresh fake Discord for one test (the Discord tests call it ``fake``)."""
    with running_fake_discord() as server:
        yield server


@pytest.fixture
def _restore_discord_globals() -> Iterator[None]:
    """Put back the REST and gateway URLs a test pointed discord.py at.

    The Discord tests use it as ``pytest.mark.usefixtures("_restore_discord_globals")``.
    """
    rest, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    yield
    discord.http.Route.BASE = rest
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway
