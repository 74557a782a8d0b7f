"""Display names of Slack users, from events when they carry them, else ``users.info``.

A name costs an API call, so answers are cached (an hour; a failed lookup for a minute, so a
rate-limited or unreachable API is not asked again for every message).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

NAME_TTL_SECONDS = 3600.0
FAILED_LOOKUP_TTL_SECONDS = 60.0
MAX_CACHED_USERS = 10_000


@dataclass(frozen=True, slots=True)
class SlackUser:
    """What the adapter needs to know about a message's author."""

    id: str
    name: str
    """Display name, else real name, else user name, else the id."""
    is_bot: bool = False


def name_from_profile(profile: Mapping[str, Any] | None, fallback: str | None = None) -> str | None:
    """The best display name in a Slack user profile (``display_name`` first)."""
    if profile:
        for key in ("display_name", "real_name", "name"):
            value = profile.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return fallback


class UserDirectory:
    """Looks users up once and caches them; never raises."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl: float = NAME_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, SlackUser]] = OrderedDict()

    def remember(self, user: SlackUser, ttl: float | None = None) -> None:
        """Cache what an event told us about a user."""
        self._cache[user.id] = (self._clock() + (self._ttl if ttl is None else ttl), user)
        self._cache.move_to_end(user.id)
        while len(self._cache) > MAX_CACHED_USERS:
            self._cache.popitem(last=False)

    def cached(self, user_id: str) -> SlackUser | None:
        """The cached entry, if fresh."""
        entry = self._cache.get(user_id)
        if entry is None or entry[0] < self._clock():
            return None
        return entry[1]

    async def lookup(self, user_id: str) -> SlackUser:
        """The user, from the cache or ``users.info``.

        The id stands in for the name when Slack cannot say.
        """
        cached = self.cached(user_id)
        if cached is not None:
            return cached
        try:
            response = await self._client.users_info(user=user_id)
        except (SlackApiError, SlackClientError, aiohttp.ClientError, OSError, TimeoutError):
            log.info("users.info failed; using the user id as name", extra={"user": user_id})
            unknown = SlackUser(user_id, user_id)
            self.remember(unknown, ttl=FAILED_LOOKUP_TTL_SECONDS)
            return unknown
        data = response.get("user") or {}
        name = name_from_profile(data.get("profile")) or name_from_profile(data) or user_id
        user = SlackUser(user_id, name, is_bot=bool(data.get("is_bot")))
        self.remember(user)
        return user
