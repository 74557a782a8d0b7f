"""The live feed of web chat conversations: what the page's event stream waits on.

Two kinds of event, keyed by the stored chat id of the conversation (the page's
conversation id in ``local`` mode, ``{browser}.{conversation}`` in ``public`` mode):

- ``message`` ``{"id": line id}``: a line was stored (a post) or delivered (a reply, a
  notice, a command's answer). The stream reads the line from the database, which stays
  the only source of lines, so a dropped event delays a line but never loses it.
- ``draft`` ``{"reply_to": line id, "text": ...}``: the reply to that line so far, while
  the model writes it (:func:`publish_draft`). Drafts are best effort: only the latest
  matters, and the final reply replaces it.

Redis pub/sub carries them between processes (the worker delivers, the gateway streams);
with no Redis (``hubbub up`` embedded) the feed stays in the process. Publishing never
fails the caller: with Redis away it logs and the stream falls back to polling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

EventType = Literal["message", "draft"]
MESSAGE: EventType = "message"
DRAFT: EventType = "draft"
CHANNEL_PREFIX = "hubbub:webchat:feed"
SUBSCRIBER_QUEUE_SIZE = 256
"""Events held for one slow stream; past it they are dropped (lines are re-read anyway)."""
REDIS_TIMEOUT_SECONDS = 5.0
STREAM_META_KEY = "stream"
"""Message meta of a web chat post whose client asked for drafts (``"stream": true``)."""


class FeedUnavailable(Exception):
    """The feed cannot be subscribed to or read (Redis is away)."""


@dataclass(frozen=True, slots=True)
class FeedEvent:
    """One event of a conversation's feed."""

    type: EventType
    data: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> str:
        """The event as one JSON text (the Redis message)."""
        return json.dumps({"type": self.type, "data": self.data}, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str | bytes) -> FeedEvent | None:
        """The event in ``raw``, or ``None`` when it is not one (logged, never raised)."""
        try:
            value = json.loads(raw)
            kind, data = value["type"], value["data"]
        except (ValueError, TypeError, KeyError):
            log.warning("a web chat feed message is not an event; dropped")
            return None
        if kind not in (MESSAGE, DRAFT) or not isinstance(data, dict):
            log.warning("a web chat feed event has an unknown shape; dropped")
            return None
        return cls(kind, data)


def message_event(line_id: int | str) -> FeedEvent:
    """A line of the conversation was stored or delivered."""
    return FeedEvent(MESSAGE, {"id": str(line_id)})


def draft_event(reply_to_message_id: int | str, text: str) -> FeedEvent:
    """The reply to line ``reply_to_message_id`` so far."""
    return FeedEvent(DRAFT, {"reply_to": str(reply_to_message_id), "text": text})


class Subscription(ABC):
    """One stream's view of one conversation's feed."""

    @abstractmethod
    async def next_event(self, wait_seconds: float) -> FeedEvent | None:
        """The next event, or ``None`` after ``wait_seconds`` without one.

        Raises:
            FeedUnavailable: the feed went away; subscribe again later.
        """

    def __aiter__(self) -> AsyncIterator[FeedEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[FeedEvent]:
        while True:
            event = await self.next_event(wait_seconds=3600.0)
            if event is not None:
                yield event


class Feed(ABC):
    """Publishes and subscribes to conversation events."""

    @abstractmethod
    def publish(self, conversation_id: str, event: FeedEvent) -> None:
        """Send ``event`` to every current subscriber; thread-safe, never raises."""

    @abstractmethod
    def subscribe(self, conversation_id: str) -> AbstractAsyncContextManager[Subscription]:
        """``async with feed.subscribe(id) as events:`` the conversation's events from now on.

        Raises:
            FeedUnavailable: (on entering) the feed cannot be reached.
        """

    @abstractmethod
    def watched(self, conversation_id: str) -> bool:
        """Whether a page's event stream listens to the conversation now; never raises.

        A turn streams its reply only to a conversation someone watches: drafts nobody
        hears cost a streamed model call and nothing else.
        """

    def publish_draft(
        self, conversation_id: str, reply_to_message_id: int | str, text: str
    ) -> None:
        """Show the reply to line ``reply_to_message_id`` as it is so far (for streaming).

        ``text`` is the whole reply so far (Markdown), not the newest part: a stream that
        missed a draft still shows the right text with the next one.
        """
        self.publish(conversation_id, draft_event(reply_to_message_id, text))

    async def aclose(self) -> None:  # noqa: B027 (optional hook)
        """Release connections; the default holds none."""


class _QueueSubscription(Subscription):
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[FeedEvent] = asyncio.Queue(SUBSCRIBER_QUEUE_SIZE)

    def offer(self, event: FeedEvent) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            log.debug("a web chat stream is behind; a feed event is dropped")

    async def next_event(self, wait_seconds: float) -> FeedEvent | None:
        try:
            return await asyncio.wait_for(self.queue.get(), wait_seconds)
        except TimeoutError:
            return None


class LocalFeed(Feed):
    """The feed inside one process (embedded mode): publishers on any thread."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[_QueueSubscription]] = {}
        self._lock = threading.Lock()

    def publish(self, conversation_id: str, event: FeedEvent) -> None:
        """Queue ``event`` on each subscriber's own event loop."""
        with self._lock:
            subscribers = list(self._subscribers.get(conversation_id, ()))
        for subscriber in subscribers:
            # A stream whose loop has closed is going away: nothing to tell it.
            with suppress(RuntimeError):
                subscriber.loop.call_soon_threadsafe(subscriber.offer, event)

    def watched(self, conversation_id: str) -> bool:
        """Whether a stream of this process subscribes to the conversation."""
        with self._lock:
            return conversation_id in self._subscribers

    @asynccontextmanager
    async def subscribe(self, conversation_id: str) -> AsyncIterator[Subscription]:
        """Events published in this process from now on."""
        subscription = _QueueSubscription()
        with self._lock:
            self._subscribers.setdefault(conversation_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            with self._lock:
                remaining = self._subscribers.get(conversation_id, set())
                remaining.discard(subscription)
                if not remaining:
                    self._subscribers.pop(conversation_id, None)


class _RedisSubscription(Subscription):
    def __init__(self, pubsub: aioredis.client.PubSub) -> None:
        self._pubsub = pubsub

    async def next_event(self, wait_seconds: float) -> FeedEvent | None:
        try:
            message = await self._pubsub.get_message(
                ignore_subscribe_messages=True, timeout=wait_seconds
            )
        except (RedisError, OSError) as exc:
            raise FeedUnavailable(f"the web chat feed is unavailable: {exc}") from exc
        if message is None or message.get("type") != "message":
            return None
        return FeedEvent.decode(message["data"])


class RedisFeed(Feed):
    """The feed over Redis pub/sub, one channel per conversation.

    The channel names the Redis database too: pub/sub ignores database numbers, and two
    deployments on one Redis (or two test runs) must not hear each other.
    """

    def __init__(self, url: str) -> None:
        self._publisher = redis.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
        )
        self._url = url
        database = self._publisher.connection_pool.connection_kwargs.get("db", 0)
        self._prefix = f"{CHANNEL_PREFIX}:{database}:"
        self._subscriber: aioredis.Redis | None = None

    def _channel(self, conversation_id: str) -> str:
        return self._prefix + conversation_id

    def publish(self, conversation_id: str, event: FeedEvent) -> None:
        """``PUBLISH`` to the conversation's channel; with Redis away, log and go on."""
        try:
            self._publisher.publish(self._channel(conversation_id), event.encode())
        except (RedisError, OSError) as exc:
            log.warning(
                "web chat feed unavailable; the page's stream falls back to reading the database",
                extra={"event": event.type, "error": type(exc).__name__},
            )

    def watched(self, conversation_id: str) -> bool:
        """``PUBSUB NUMSUB`` of the conversation's channel; with Redis away, nobody watches.

        (Drafts could not reach a page then anyway: its stream falls back to polling.)
        """
        channel = self._channel(conversation_id)
        try:
            counts = self._publisher.pubsub_numsub(channel)
        except (RedisError, OSError) as exc:
            log.warning(
                "web chat feed unavailable; the reply is not streamed",
                extra={"error": type(exc).__name__},
            )
            return False
        return any(count > 0 for _, count in counts)

    def _client(self) -> aioredis.Redis:
        if self._subscriber is None:
            self._subscriber = aioredis.Redis.from_url(
                self._url, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
            )
        return self._subscriber

    @asynccontextmanager
    async def subscribe(self, conversation_id: str) -> AsyncIterator[Subscription]:
        """A pub/sub connection on the conversation's channel, for this stream alone."""
        pubsub = self._client().pubsub()
        try:
            try:
                await pubsub.subscribe(self._channel(conversation_id))
            except (RedisError, OSError) as exc:
                raise FeedUnavailable(f"the web chat feed is unavailable: {exc}") from exc
            yield _RedisSubscription(pubsub)
        finally:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py
            except (RedisError, OSError):
                log.debug("closing a web chat feed subscription failed", exc_info=True)

    async def aclose(self) -> None:
        """Close both clients."""
        self._publisher.close()
        if self._subscriber is not None:
            await self._subscriber.aclose()


LOCAL_FEED = LocalFeed()
"""The one in-process feed: the embedded runner's deliverer and the gateway share it."""


def feed_for(redis_url: str | None) -> Feed:
    """The feed of a deployment: over Redis when it has one, else :data:`LOCAL_FEED`."""
    return RedisFeed(redis_url) if redis_url else LOCAL_FEED
