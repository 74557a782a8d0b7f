"""A never-connected Discord client fed real-format payloads through discord.py's own parsers.

discord.py has no public way to parse a gateway payload without a connection, so the
private ``_connection`` (its ``ConnectionState``) is touched here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import discord
import pytest

from adapters.base import BotConfig
from adapters.discord.inbound import Me
from adapters.discord.listener import GatewayClient
from adapters.messages import InboundMessage
from tests.fixtures.platform_servers.discord import BOT_ID, TOKEN, load_payload


@dataclass
class Parsed:
    """A :class:`GatewayClient` that has seen READY's user and GUILD_CREATE, never connected."""

    client: GatewayClient
    received: list[InboundMessage] = field(default_factory=list)

    @property
    def state(self) -> Any:
        """discord.py's connection state."""
        return self.client._connection

    @property
    def me(self) -> Me:
        """Our bot, for addressing checks."""
        return self.client.receiver.me

    def parse(self, event: str, payload: dict[str, Any]) -> None:
        """Run discord.py's parser for a gateway dispatch (``MESSAGE_CREATE`` …)."""
        self.state.parsers[event](payload)

    def message(self, payload: dict[str, Any] | str) -> discord.Message:
        """A :class:`discord.Message` built the way ``parse_message_create`` builds it."""
        data: Any = load_payload(payload) if isinstance(payload, str) else payload
        channel, _guild = self.state._get_guild_channel(data)
        return discord.Message(state=self.state, channel=channel, data=data)


def make_parsed(config: BotConfig | None = None) -> Parsed:
    """A fresh :class:`Parsed` whose sink records what it gets."""
    received: list[InboundMessage] = []

    async def sink(inbound: InboundMessage) -> None:
        received.append(inbound)

    config = config or BotConfig(platform="discord", token=TOKEN)
    client = GatewayClient(config, sink, discover_gateway=False)
    state = client._connection
    state.user = discord.ClientUser(state=state, data=load_payload("ready")["user"])
    client.receiver.set_bot_user(int(BOT_ID))
    state.parsers["GUILD_CREATE"](load_payload("guild_create"))
    return Parsed(client, received)


@pytest.fixture
def parsed() -> Parsed:
    """A parsing-only Discord client for the default bot."""
    return make_parsed()


@pytest.fixture
def parsed_for() -> Callable[[BotConfig], Parsed]:
    """Build a parsing-only client for a given bot configuration."""
    return make_parsed
