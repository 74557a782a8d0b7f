"""Pace discord.py's REST calls with the bot's shared scheduler, learning Discord's buckets.

discord.py keeps its own rate-limit buckets, but only for its process; several workers
posting as one bot each believe they have the whole budget. So every request also waits
for a slot in the bot's shared scheduler (:mod:`adapters.pacing`), through an
``aiohttp.TraceConfig`` that discord.py installs on its HTTP session: one slot in the bot's
global bucket (50 requests a second) and, for a channel's routes, one in the route's
bucket for that channel. The route's bucket is the one Discord names
(``X-RateLimit-Bucket``) once a response told it. A bucket Discord reports spent
(``X-RateLimit-Remaining: 0``) is held back until its ``X-RateLimit-Reset-After`` for every
worker, as is a bucket (or, for a global limit, the bot) that answered 429. The limit a
response names for a route is shared the same way: a worker that has not called the route
yet paces it by what another one learnt.

A slot too far away fails the request as discord.py's own long 429 does
(:class:`discord.RateLimited`), before it is sent.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace

import aiohttp
import discord
import yarl

from adapters.pacing import BotPacer, Bucket, PaceExceeded, Rate

log = logging.getLogger(__name__)

_VERSION_PREFIX = re.compile(r"^.*?/api/v\d+")
RECHECK_SECONDS = 30.0
"""How often a worker asks the shared scheduler for a route's limit another one learnt."""
MAJOR_RESOURCE = "channels"
"""Discord buckets a channel's routes per channel (its "major parameter")."""


def route_of(method: str, url: yarl.URL) -> tuple[str, str | None]:
    """The route (``POST /channels/{id}/messages``) and its channel, if it is a channel's."""
    parts = _VERSION_PREFIX.sub("", url.path).strip("/").split("/")
    channel = parts[1] if len(parts) > 1 and parts[0] == MAJOR_RESOURCE else None
    template = "/".join("{id}" if part.isdigit() else part for part in parts)
    return f"{method} /{template}", channel


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except ValueError:
        return 0.0


class DiscordPacing:
    """The shared pacing of one discord.py client, as an aiohttp trace."""

    def __init__(self, pacer: BotPacer, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._pacer = pacer
        self._clock = clock
        self._learned: dict[str, tuple[Rate | None, float]] = {}
        """Route -> the limit Discord's headers gave for it (``None``: none yet), and when
        the shared scheduler was last asked."""

    def trace(self) -> aiohttp.TraceConfig:
        """What to pass discord.py as ``http_trace``."""
        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(self._start)
        trace.on_request_end.append(self._end)
        return trace

    @staticmethod
    def _bucket_key(method: str, url: yarl.URL) -> str | None:
        route, channel = route_of(method, url)
        return None if channel is None else f"{route}:{channel}"

    async def _route_bucket(self, method: str, url: yarl.URL) -> Bucket | None:
        key = self._bucket_key(method, url)
        default = self._pacer.bucket("route", key)
        if key is None or default is None:
            return None
        learned = await self._learned_rate(route_of(method, url)[0])
        return default if learned is None else Bucket(default.key, learned)

    async def _learned_rate(self, route: str) -> Rate | None:
        """The route's limit as any worker of the bot learnt it, asked again now and then."""
        rate, asked = self._learned.get(route, (None, -math.inf))
        now = self._clock()
        if now - asked >= RECHECK_SECONDS:
            rate = await self._pacer.learned(route)
            self._learned[route] = (rate, now)
        return rate

    async def _learn(self, method: str, url: yarl.URL, headers: Mapping[str, str]) -> None:
        """A window's first call tells its limit: ``Limit`` calls in ``Reset-After`` s.

        Told to every worker of the bot, so that none paces the route by the default.
        """
        try:
            limit = int(headers.get("X-RateLimit-Limit", ""))
            remaining = int(headers.get("X-RateLimit-Remaining", ""))
        except ValueError:
            return
        window = _seconds(headers.get("X-RateLimit-Reset-After"))
        if limit >= 1 and remaining == limit - 1 and window > 0:
            route = route_of(method, url)[0]
            rate = Rate(limit, math.ceil(window * 10) / 10)
            known, told = self._learned.get(route, (None, -math.inf))
            now = self._clock()
            # Every window's first answer names the limit again: told on when it changed,
            # and renewed no more often than the others ask for it.
            if known != rate or now - told >= RECHECK_SECONDS:
                await self._pacer.learn(route, rate)
                self._learned[route] = (rate, now)

    async def _start(
        self,
        session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        buckets = [self._pacer.bucket("bot"), await self._route_bucket(params.method, params.url)]
        try:
            await self._pacer.acquire(buckets)
        except PaceExceeded as exc:
            raise discord.RateLimited(exc.wait) from exc

    async def _end(
        self,
        session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        headers = params.response.headers
        key = self._bucket_key(params.method, params.url)
        reset_after = _seconds(headers.get("X-RateLimit-Reset-After"))
        if params.response.status == 429:
            wait = reset_after or _seconds(headers.get("Retry-After"))
            is_global = (
                headers.get("X-RateLimit-Global", "").lower() == "true"
                or headers.get("X-RateLimit-Scope") == "global"
            )
            log.info(
                "Discord rate limit",
                extra={"bucket": headers.get("X-RateLimit-Bucket"), "global": is_global},
            )
            if is_global or key is None:
                await self._pacer.rate_limited([self._pacer.key("bot")], wait)
            else:
                await self._pacer.rate_limited([self._pacer.key("route", key)], wait)
            return
        await self._learn(params.method, params.url, headers)
        if key is not None and headers.get("X-RateLimit-Remaining") == "0":
            await self._pacer.rate_limited([self._pacer.key("route", key)], reset_after)
