"""Pace one bot's platform calls across every worker, so none of them trips flood control.

A platform limits a bot per bot, per chat, per route or method; several workers answering
one bot each know only their own calls. So every paced call first reserves a slot in a
scheduler shared through Redis (one per bot, whichever process asks), or in this process
in the embedded mode: a slot in *every* bucket the call counts against (the bot, the chat,
the group, the route), all at once and atomically.

A bucket allows ``count`` calls in any window of ``seconds`` (a sliding window: bursts up
to ``count``, then one call per freed place). A 429 from the platform blocks the buckets
it names for its ``Retry-After`` for every worker. Waiting is bounded: a call whose slot
is further away than the bot's maximum wait reserves nothing and fails as rate limited
*before* it is sent (:class:`PaceExceeded`), so it is safe to try again later.

Redis being unreachable never stops delivery: the scheduler paces in this process
instead, with a warning, and goes back to Redis once it answers again. The platform
packages map their calls onto buckets (``adapters/<platform>/pacing.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import limits
import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

REDIS_TIMEOUT_SECONDS = 0.5
"""Bound on one scheduler round trip: a slow Redis must not hold up a reply for long."""
REDIS_RETRY_SECONDS = 5.0
"""After Redis failed, pace in process for this long before asking Redis again."""
KEY_PREFIX = "hubbub:pace"
FORGET_AFTER_KEYS = 4096
"""The in-process scheduler tidies up once it holds this many chats' buckets…"""
FORGET_AFTER_SECONDS = 3600.0
"""…dropping those unused this long (longer than any window)."""
OFF = "off"
"""A limit written ``off`` paces nothing for that bucket."""
LEARNED = "learned"
"""Where the limits a platform names in its responses (Discord's routes) are kept."""
LEARNED_SECONDS = 3600.0
"""How long a learned limit is kept; a response that names it again renews it."""

max_wait_override: ContextVar[float | None] = ContextVar("pacing_max_wait", default=None)
"""A shorter maximum wait for the calls made in this context (streamed drafts)."""
wait_budget: ContextVar[list[float] | None] = ContextVar("pacing_wait_budget", default=None)
"""Seconds the calls made in this context may still wait in all (one delivery's chunks)."""
share_override: ContextVar[float] = ContextVar("pacing_share", default=1.0)
"""The share of each limit the calls made in this context may fill (streamed drafts leave
the rest to final replies)."""


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` calls in any window of ``seconds``."""

    count: int
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        """A rate in the ``limits`` notation: ``1/second``, ``20/minute``, ``5/5 seconds``.

        Raises:
            ValueError: not a rate.
        """
        item = limits.parse(text)
        if item.amount < 1:
            raise ValueError(f"{text!r}: a rate allows at least one call")
        return cls(item.amount, float(item.get_expiry()))


def parse_limits(texts: Mapping[str, str]) -> dict[str, Rate]:
    """Rates by bucket name; ``off`` leaves a bucket out.

    Raises:
        ValueError: a value is not a rate.
    """
    return {name: Rate.parse(text) for name, text in texts.items() if text.strip() != OFF}


@dataclass(frozen=True, slots=True)
class Bucket:
    """One limit a call counts against: ``chat:42`` at 1 per second."""

    key: str
    rate: Rate


@dataclass(frozen=True, slots=True)
class PacingConfig:
    """How a bot's calls are paced (built from the settings by the workers).

    The default paces nothing: a deliverer made without settings (a script) is unpaced.
    """

    limits: Mapping[str, Rate] = field(default_factory=dict)
    """The platform's rates by bucket name (``bot``, ``chat``, ``group``, ``route``…)."""
    max_wait_seconds: float = 0.0
    """Longest wait for a slot; past it the call fails as rate limited, unsent."""
    redis_url: str | None = None
    """The shared scheduler; ``None`` paces in this process (embedded mode)."""


EPSILON = 1e-6
"""A slot goes this much after the call whose window it waits out (float rounding)."""


def fits(events: Sequence[float], rate: Rate, slot: float) -> bool:
    """Whether a call at ``slot`` keeps every window of ``rate.seconds`` within ``rate.count``.

    ``events`` are the bucket's reserved slots, past and future, in any order; only the
    windows that hold ``slot`` can change, and a window holds most calls when it ends on
    one, so those ending at ``slot`` and at each later slot less than a window away are
    counted.
    """
    ends = [slot, *(e for e in events if slot < e < slot + rate.seconds)]
    for end in ends:
        inside = sum(1 for e in events if end - rate.seconds < e <= end)
        if inside >= rate.count:
            return False
    return True


def earliest_slot(logs: Sequence[tuple[Sequence[float], Rate]], start: float) -> float:
    """The earliest time from ``start`` one call fits in every bucket (its slots and rate).

    A call fits again only when some slot leaves a window, so the candidates are ``start``
    and the moments slots leave; the last of them always fits.
    """
    freed = {e + rate.seconds + EPSILON for events, rate in logs for e in events}
    candidates = sorted({start} | {moment for moment in freed if moment > start})
    for candidate in candidates:
        if all(fits(events, rate, candidate) for events, rate in logs):
            return candidate
    return candidates[-1]


@dataclass(frozen=True, slots=True)
class Reservation:
    """What the scheduler answered: a slot ``wait`` seconds from now, or none."""

    granted: bool
    wait: float


class PaceExceeded(Exception):
    """The next slot is further away than the maximum wait: nothing was reserved or sent."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"the bot's rate limits leave no slot for {wait:.1f}s")
        self.wait = wait


class Scheduler(ABC):
    """Reserves slots in buckets; the same interface in process and in Redis."""

    @abstractmethod
    async def reserve(self, buckets: Sequence[Bucket], max_wait: float) -> Reservation:
        """Reserve the earliest slot common to all ``buckets``, unless it is past ``max_wait``."""

    @abstractmethod
    async def block(self, keys: Sequence[str], seconds: float) -> None:
        """Hand out no slot in these buckets for ``seconds`` (the platform said 429)."""

    @abstractmethod
    async def remember(self, key: str, value: str, seconds: float) -> None:
        """Keep ``value`` under ``key`` for ``seconds``, for every caller (a learned limit)."""

    @abstractmethod
    async def recall(self, key: str) -> str | None:
        """What :meth:`remember` kept under ``key``, unless it has expired."""

    async def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections; the default holds none."""


class LocalScheduler(Scheduler):
    """The scheduler of one process (the embedded mode, and the fallback when Redis is down).

    Args:
        clock: monotonic seconds (tests move their own).
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._logs: dict[str, list[float]] = {}
        self._blocked: dict[str, float] = {}
        self._kept: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def reserve_now(self, buckets: Sequence[Bucket], max_wait: float) -> Reservation:
        """:meth:`reserve`, synchronously."""
        with self._lock:
            now = self._clock()
            start = now
            logs: list[tuple[list[float], Rate]] = []
            for bucket in buckets:
                horizon = now - bucket.rate.seconds
                events = [e for e in self._logs.get(bucket.key, ()) if e > horizon]
                self._logs[bucket.key] = events
                logs.append((events, bucket.rate))
                start = max(start, self._blocked.get(bucket.key, 0.0))
            slot = earliest_slot(logs, start)
            wait = slot - now
            if wait > max_wait:
                return Reservation(False, wait)
            for events, _ in logs:
                events.append(slot)
            self._forget(now)
            return Reservation(True, wait)

    async def reserve(self, buckets: Sequence[Bucket], max_wait: float) -> Reservation:
        """See :meth:`Scheduler.reserve`."""
        return self.reserve_now(buckets, max_wait)

    async def block(self, keys: Sequence[str], seconds: float) -> None:
        """See :meth:`Scheduler.block`."""
        with self._lock:
            until = self._clock() + seconds
            for key in keys:
                self._blocked[key] = max(self._blocked.get(key, 0.0), until)

    async def remember(self, key: str, value: str, seconds: float) -> None:
        """See :meth:`Scheduler.remember`."""
        with self._lock:
            self._kept[key] = (value, self._clock() + seconds)

    async def recall(self, key: str) -> str | None:
        """See :meth:`Scheduler.recall`."""
        with self._lock:
            value, until = self._kept.get(key, (None, 0.0))
            return value if until > self._clock() else None

    def _forget(self, now: float) -> None:
        """Drop blocks that are over and logs an hour old, once there are many."""
        if len(self._blocked) > FORGET_AFTER_KEYS:
            self._blocked = {k: v for k, v in self._blocked.items() if v > now}
        if len(self._logs) > FORGET_AFTER_KEYS:
            old = now - FORGET_AFTER_SECONDS
            self._logs = {k: v for k, v in self._logs.items() if v and v[-1] > old}


RESERVE_SCRIPT = """
-- The same arithmetic as fits() and earliest_slot() above.
-- KEYS: per bucket, its log (a sorted set of slot times) then its block (a time).
-- ARGV: now ('' for the server's clock), max_wait, a token, then per bucket count, seconds.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local max_wait = tonumber(ARGV[2])
local epsilon = 0.000001

local function fits(events, count, seconds, slot)
  local ends = {slot}
  for _, e in ipairs(events) do
    if e > slot and e < slot + seconds then ends[#ends + 1] = e end
  end
  for _, stop in ipairs(ends) do
    local inside = 0
    for _, e in ipairs(events) do
      if e > stop - seconds and e <= stop then inside = inside + 1 end
    end
    if inside >= count then return false end
  end
  return true
end

local buckets = #KEYS / 2
local start = now
local logs = {}
for i = 1, buckets do
  local count = tonumber(ARGV[2 * i + 2])
  local seconds = tonumber(ARGV[2 * i + 3])
  local blocked = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
  if blocked > start then start = blocked end
  redis.call('ZREMRANGEBYSCORE', KEYS[2 * i - 1], '-inf', string.format('%.6f', now - seconds))
  local raw = redis.call('ZRANGE', KEYS[2 * i - 1], 0, -1, 'WITHSCORES')
  local events = {}
  for j = 2, #raw, 2 do events[#events + 1] = tonumber(raw[j]) end
  logs[i] = {events, count, seconds}
end
local candidates = {start}
for i = 1, buckets do
  for _, e in ipairs(logs[i][1]) do
    local freed = e + logs[i][3] + epsilon
    if freed > start then candidates[#candidates + 1] = freed end
  end
end
table.sort(candidates)
local slot = candidates[#candidates]
for _, candidate in ipairs(candidates) do
  local ok = true
  for i = 1, buckets do
    if not fits(logs[i][1], logs[i][2], logs[i][3], candidate) then
      ok = false
      break
    end
  end
  if ok then
    slot = candidate
    break
  end
end
local wait = slot - now
if wait > max_wait then return {0, string.format('%.6f', wait)} end
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local latest = slot
  for _, e in ipairs(logs[i][1]) do
    if e > latest then latest = e end
  end
  redis.call('ZADD', key, slot, ARGV[3])
  redis.call('PEXPIRE', key, math.ceil((latest - now + logs[i][3]) * 1000) + 1000)
end
return {1, string.format('%.6f', wait)}
"""

BLOCK_SCRIPT = """
-- KEYS: the blocks. ARGV: now ('' for the server's clock), seconds.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local seconds = tonumber(ARGV[2])
local blocked = now + seconds
for _, key in ipairs(KEYS) do
  if blocked > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%.6f', blocked), 'PX', math.ceil(seconds * 1000) + 1000)
  end
end
return 1
"""


class RedisScheduler(Scheduler):
    """The scheduler every worker shares: each reservation is one Lua script, atomic.

    Times are Redis's own clock, so workers on different hosts agree. ``clock`` replaces
    it (tests of the arithmetic); the keys of one bot share a hash tag (Redis Cluster).
    """

    def __init__(self, url: str, *, clock: Clock | None = None) -> None:
        self._url = url
        self._clock = clock
        self._client: aioredis.Redis | None = None

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            self._client = aioredis.Redis.from_url(
                self._url,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            )
        return self._client

    def _now(self) -> str:
        return "" if self._clock is None else f"{self._clock():.6f}"

    async def reserve(self, buckets: Sequence[Bucket], max_wait: float) -> Reservation:
        """See :meth:`Scheduler.reserve`.

        Raises:
            RedisError: Redis could not be reached or refused the script.
        """
        keys: list[str] = []
        args: list[Any] = [self._now(), f"{max_wait:.6f}", uuid.uuid4().hex]
        for bucket in buckets:
            keys += [f"{bucket.key}:log", f"{bucket.key}:block"]
            args += [bucket.rate.count, f"{bucket.rate.seconds:.6f}"]
        script = self._redis().eval(RESERVE_SCRIPT, len(keys), *keys, *args)
        granted, wait = await script
        return Reservation(bool(int(granted)), max(0.0, float(wait)))

    async def block(self, keys: Sequence[str], seconds: float) -> None:
        """See :meth:`Scheduler.block`.

        Raises:
            RedisError: Redis could not be reached or refused the script.
        """
        blocks = [f"{key}:block" for key in keys]
        args = [self._now(), f"{seconds:.6f}"]
        await self._redis().eval(BLOCK_SCRIPT, len(blocks), *blocks, *args)

    async def remember(self, key: str, value: str, seconds: float) -> None:
        """See :meth:`Scheduler.remember` (``SET`` with an expiry).

        Raises:
            RedisError: Redis could not be reached.
        """
        await self._redis().set(key, value, px=max(1, math.ceil(seconds * 1000)))

    async def recall(self, key: str) -> str | None:
        """See :meth:`Scheduler.recall`.

        Raises:
            RedisError: Redis could not be reached.
        """
        value = await self._redis().get(key)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    async def close(self) -> None:
        """Close the Redis connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class FallbackScheduler(Scheduler):
    """Redis while it answers; this process's scheduler while it does not (with a warning).

    Args:
        shared: the Redis scheduler.
        local: where calls are paced meanwhile.
        clock: monotonic seconds, for when Redis is asked again.
    """

    def __init__(self, shared: Scheduler, local: Scheduler, *, clock: Clock = time.monotonic):
        self._shared = shared
        self._local = local
        self._clock = clock
        self._down_until: float | None = None

    @property
    def degraded(self) -> bool:
        """Whether calls are paced in this process because Redis failed."""
        return self._down_until is not None

    async def reserve(self, buckets: Sequence[Bucket], max_wait: float) -> Reservation:
        """See :meth:`Scheduler.reserve`."""
        return await self._either(lambda s: s.reserve(buckets, max_wait))

    async def block(self, keys: Sequence[str], seconds: float) -> None:
        """Block in both: a Redis outage right after must not forget the 429."""
        await self._local.block(keys, seconds)
        await self._either(lambda s: s.block(keys, seconds))

    async def remember(self, key: str, value: str, seconds: float) -> None:
        """Keep it in both, like a block."""
        await self._local.remember(key, value, seconds)
        await self._either(lambda s: s.remember(key, value, seconds))

    async def recall(self, key: str) -> str | None:
        """See :meth:`Scheduler.recall`."""
        return await self._either(lambda s: s.recall(key))

    async def close(self) -> None:
        """Close the Redis scheduler's connections."""
        await self._shared.close()

    async def _either(self, call: Callable[[Scheduler], Awaitable[T]]) -> T:
        if self._down_until is not None and self._clock() < self._down_until:
            return await call(self._local)
        try:
            result = await call(self._shared)
        except (RedisError, OSError, TimeoutError) as exc:
            if self._down_until is None:
                log.warning(
                    "the shared rate-limit scheduler (Redis) is unavailable; pacing this "
                    "process's platform calls on its own until it is back",
                    extra={"error": type(exc).__name__},
                )
            self._down_until = self._clock() + REDIS_RETRY_SECONDS
            return await call(self._local)
        if self._down_until is not None:
            self._down_until = None
            log.info("the shared rate-limit scheduler (Redis) is back; pacing through it")
        return result


LOCAL = LocalScheduler()
"""This process's scheduler: every bot's deliverers in the process share it."""


def scheduler_for(config: PacingConfig) -> Scheduler:
    """Redis (falling back to :data:`LOCAL`) when configured, else :data:`LOCAL`."""
    if config.redis_url is None:
        return LOCAL
    return FallbackScheduler(RedisScheduler(config.redis_url), LOCAL)


def bot_scope(platform: str, token: str | None) -> str:
    """What names one platform bot in bucket keys, whatever its Hubbub name: its token's hash.

    Two Hubbub bots with the same token are one bot to the platform, and share its limits.
    """
    digest = hashlib.sha256((token or "").encode()).hexdigest()[:16]
    return f"{platform}:{digest}"


class BotPacer:
    """One bot's view of the scheduler: its buckets, its limits, its maximum wait.

    Args:
        config: the bot's rates, maximum wait and scheduler location.
        scope: the bot's name in keys (:func:`bot_scope`).
        scheduler: where slots are reserved (default :func:`scheduler_for`).
        sleep: how a granted slot is waited for.
    """

    def __init__(
        self,
        config: PacingConfig,
        scope: str,
        *,
        scheduler: Scheduler | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.config = config
        self._prefix = f"{KEY_PREFIX}:{{{scope}}}"
        self.scheduler = scheduler if scheduler is not None else scheduler_for(config)
        self._sleep = sleep

    def bucket(self, name: str, key: str | None = None) -> Bucket | None:
        """The bucket of limit ``name`` (one per ``key``: a chat, a route), if it is limited."""
        rate = self.config.limits.get(name)
        if rate is None:
            return None
        return Bucket(self.key(name, key), rate)

    def key(self, name: str, key: str | None = None) -> str:
        """The scheduler key of limit ``name`` for ``key``."""
        return f"{self._prefix}:{name}" if key is None else f"{self._prefix}:{name}:{key}"

    async def learned(self, name: str) -> Rate | None:
        """The limit the platform named for ``name`` (a route), as any worker learnt it.

        ``None`` when none did (:meth:`learn`).
        """
        text = await self.scheduler.recall(self.key(LEARNED, name))
        if text is None:
            return None
        count, _, seconds = text.partition(" ")
        try:
            return Rate(int(count), float(seconds))
        except ValueError:
            return None

    async def learn(self, name: str, rate: Rate) -> None:
        """Tell every worker of the bot the limit the platform named for ``name``."""
        await self.scheduler.remember(
            self.key(LEARNED, name), f"{rate.count} {rate.seconds}", LEARNED_SECONDS
        )

    async def acquire(self, buckets: Sequence[Bucket | None]) -> None:
        """Wait for a slot in every bucket, then return: the call may go out now.

        Raises:
            PaceExceeded: the slot is further away than the maximum wait; nothing was
                reserved, so the call must not be made now.
        """
        wanted = [bucket for bucket in buckets if bucket is not None]
        if not wanted:
            return
        share = share_override.get()
        if share < 1.0:
            # The windows count every caller's calls: a call held to a share of the count
            # only goes while the others still have the rest.
            wanted = [
                Bucket(b.key, Rate(max(1, int(b.rate.count * share)), b.rate.seconds))
                for b in wanted
            ]
        override = max_wait_override.get()
        max_wait = self.config.max_wait_seconds if override is None else override
        budget = wait_budget.get()
        if budget is not None:
            max_wait = min(max_wait, budget[0])
        reservation = await self.scheduler.reserve(wanted, max_wait)
        if not reservation.granted:
            raise PaceExceeded(reservation.wait)
        if budget is not None:
            budget[0] -= reservation.wait
        if reservation.wait > 0:
            await self._sleep(reservation.wait)

    async def rate_limited(self, keys: Sequence[str], retry_after: float) -> None:
        """The platform answered 429: every worker waits ``retry_after`` in these buckets."""
        if retry_after <= 0 or not keys:
            return
        log.info("platform rate limit recorded", extra={"retry_after": retry_after})
        await self.scheduler.block(keys, retry_after)

    async def close(self) -> None:
        """Release the scheduler's connections (the in-process one holds none)."""
        await self.scheduler.close()


async def waiting_in_all_at_most(seconds: float, call: Awaitable[T]) -> T:
    """Await ``call`` with all its platform calls together waiting at most ``seconds``.

    A delivery's send has a time limit, and a send cut off by it may have reached the
    platform: bounding the waits keeps them from ever becoming that timeout.
    """
    token = wait_budget.set([seconds])
    try:
        return await call
    finally:
        wait_budget.reset(token)


async def waiting_at_most(seconds: float, call: Awaitable[T], *, share: float = 1.0) -> T:
    """Await ``call`` with its platform calls waiting at most ``seconds`` for a slot.

    They fill at most ``share`` of each limit's count (at least one call).
    """
    token = max_wait_override.set(seconds)
    shared = share_override.set(share)
    try:
        return await call
    finally:
        share_override.reset(shared)
        max_wait_override.reset(token)
