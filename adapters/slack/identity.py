"""Who the bot is on Slack (``auth.test``), learned once and kept.

The ids tell mentions of the bot (``<@U…>``) and its own messages (``user`` / ``bot_id``)
apart from everyone else's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """The bot's ids in its workspace."""

    user_id: str
    """The bot user (``U…``): what mentions name."""
    bot_id: str | None
    """The bot (``B…``): what its messages carry as ``bot_id``."""
    team_id: str | None
    name: str
    """The bot user's name, used when a mention of it is shown to the model."""

    def is_self(self, *, user: str | None, bot_id: str | None) -> bool:
        """Whether a message with this ``user`` / ``bot_id`` was posted by the bot."""
        return (user is not None and user == self.user_id) or (
            bot_id is not None and self.bot_id is not None and bot_id == self.bot_id
        )


class IdentityUnavailable(RuntimeError):
    """``auth.test`` failed; events cannot be told apart from the bot's own yet."""


class IdentityCache:
    """Calls ``auth.test`` on first use and remembers the answer.

    A failure is not remembered: the next use asks again.
    """

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._identity: BotIdentity | None = None
        self._lock = asyncio.Lock()

    @property
    def known(self) -> BotIdentity | None:
        """The identity if it was learned already."""
        return self._identity

    async def get(self) -> BotIdentity:
        """The bot's identity.

        Raises:
            IdentityUnavailable: Slack refused the token or could not be reached.
        """
        if self._identity is not None:
            return self._identity
        async with self._lock:
            if self._identity is None:
                self._identity = await self._fetch()
        return self._identity

    async def _fetch(self) -> BotIdentity:
        try:
            response = await self._client.auth_test()
        except SlackApiError as exc:
            raise IdentityUnavailable(
                f"auth.test failed: {exc.response.get('error', 'unknown error')}"
            ) from exc
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise IdentityUnavailable(f"auth.test failed: {type(exc).__name__}: {exc}") from exc
        user_id = response.get("user_id")
        if not isinstance(user_id, str) or not user_id:
            raise IdentityUnavailable("auth.test answered without a user_id")
        return BotIdentity(
            user_id=user_id,
            bot_id=response.get("bot_id"),
            team_id=response.get("team_id"),
            name=str(response.get("user") or "bot"),
        )
