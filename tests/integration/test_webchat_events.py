"""The web chat's event stream over real HTTP: embedded (SQLite, Postgres) and with Redis and a
Celery worker (the worker delivers, the gateway streams)."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.webchat.feed import LOCAL_FEED, Feed, RedisFeed
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    ServiceProcess,
    hubbub_env,
    post_accepted,
    settings_from_env,
    start_worker,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration

EVENT_TIMEOUT = 90.0


@dataclass(frozen=True)
class Event:
    event: str
    data: dict[str, Any]
    id: str | None


class EventReader:
    """Reads one SSE stream on a thread; the test takes events in order with a bound."""

    def __init__(self, base_url: str, path: str, headers: dict[str, str] | None = None) -> None:
        self._events: queue.Queue[Event | BaseException] = queue.Queue()
        self._client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(30, read=None))
        self._request = self._client.build_request("GET", path, headers=headers)
        self._response = self._client.send(self._request, stream=True)
        self.status_code = self._response.status_code
        self._thread = threading.Thread(target=self._read, daemon=True)
        if self.status_code == 200:
            self._thread.start()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            for line in self._response.iter_lines():
                if line == "":
                    if "data" in fields:
                        self._events.put(
                            Event(
                                fields.get("event", "message"),
                                json.loads(fields["data"]),
                                fields.get("id"),
                            )
                        )
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
        except BaseException as exc:  # the stream ended: the test sees why
            self._events.put(exc)

    def next(self, *kinds: str) -> Event:
        """The next event of one of ``kinds`` (others are skipped)."""
        while True:
            item = self._events.get(timeout=EVENT_TIMEOUT)
            if isinstance(item, BaseException):
                raise AssertionError(f"the stream ended: {item!r}")
            if item.event in kinds:
                return item

    def close(self) -> None:
        self._response.close()
        self._client.close()


@pytest.fixture
def streams() -> Iterator[Callable[..., EventReader]]:
    opened: list[EventReader] = []

    def open_stream(gateway: GatewayServer, conversation: str, **kwargs: Any) -> EventReader:
        query = kwargs.pop("query", "")
        reader = EventReader(
            gateway.base_url, f"/api/webchat/{conversation}/events{query}", **kwargs
        )
        opened.append(reader)
        return reader

    yield open_stream
    for reader in opened:
        reader.close()


@dataclass
class Deployment:
    gateway: GatewayServer
    feed: Feed


@pytest.fixture(params=["embedded", "redis"])
def deployment(
    request: pytest.FixtureRequest,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    processes: list[ServiceProcess],
) -> Iterator[Deployment]:
    extra = {"streaming": "on"} if request.node.get_closest_marker("streaming") else {}
    if request.param == "embedded":
        db_url: str = request.getfixturevalue("sqlite_url")
        env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm, **extra)
        yield Deployment(gateway_factory(settings_from_env(env)), LOCAL_FEED)
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    redis_url: str = request.getfixturevalue("redis_url")
    env = hubbub_env(
        db_url=postgres_url, home=tmp_path, fake=fake_llm, redis_url=redis_url, **extra
    )
    gateway = gateway_factory(settings_from_env(env))
    processes.append(start_worker(env))
    feed = RedisFeed(redis_url)
    yield Deployment(gateway, feed)
    asyncio.run(feed.aclose())


def _client(gateway: GatewayServer) -> httpx.Client:
    return httpx.Client(base_url=gateway.base_url, timeout=30)


def test_a_reply_arrives_as_a_message_event(
    deployment: Deployment, streams: Callable[..., EventReader], fake_llm: FakeLLM
) -> None:
    with _client(deployment.gateway) as client:
        first = post_accepted(client, "live", "hello").json()
        stream = streams(deployment.gateway, "live")
        assert stream.status_code == 200
        user = stream.next("message")
        assert user.data["id"] == first["id"]
        assert user.data["role"] == "user"
        reply = stream.next("message")
        assert reply.data["role"] == "assistant"
        assert reply.data["text"] == "echo: hello"
        assert reply.data["html"] == "<p>echo: hello</p>\n"
        assert reply.data["reply_to"] == first["id"]
        assert reply.id == reply.data["id"]
        listed = client.get("/api/webchat/live/messages").json()["messages"]
        assert listed[-1] == reply.data

        second = post_accepted(client, "live", "again").json()
        assert stream.next("message").data["id"] == second["id"]
        assert stream.next("message").data["text"] == "echo: again"


def test_drafts_arrive_in_order_before_the_final_line(
    deployment: Deployment, streams: Callable[..., EventReader], fake_llm: FakeLLM
) -> None:
    fake_llm.hold = threading.Event()
    with _client(deployment.gateway) as client:
        post_accepted(client, "drafts", "warm up")
        stream = streams(deployment.gateway, "drafts")
        trigger = stream.next("message").data["id"]
        assert stream.next("state").data == {"pending": True}
        texts = ["Here", "Here is **a", "Here is **a list**:\n\n- one"]
        for text in texts:
            deployment.feed.publish_draft("drafts", trigger, text)
        drafts = [stream.next("draft").data for _ in texts]
        assert [d["text"] for d in drafts] == texts
        assert {d["reply_to"] for d in drafts} == {trigger}
        assert "<li>one</li>" in drafts[-1]["html"]
        fake_llm.hold.set()
        final = stream.next("message")
        assert final.data["reply_to"] == trigger
        assert stream.next("state").data == {"pending": False}
        # A draft that comes after the final line is not shown again.
        deployment.feed.publish_draft("drafts", trigger, "stale")
        post_accepted(client, "drafts", "next")
        assert stream.next("message", "draft").event == "message"


@pytest.mark.streaming
def test_a_reply_streams_only_to_a_conversation_a_page_watches(
    deployment: Deployment, streams: Callable[..., EventReader], fake_llm: FakeLLM
) -> None:
    with _client(deployment.gateway) as client:
        # Nobody watches: the model is called without streaming, the reply is stored as ever.
        post_accepted(client, "watched", "nobody is looking")
        assert wait_replies(client, "watched", 1)[-1]["text"] == "echo: nobody is looking"
        assert fake_llm.chat_requests()[-1].get("stream") is None

        stream = streams(deployment.gateway, "watched")
        wait_until(lambda: deployment.feed.watched("watched"), timeout=30)
        trigger = post_accepted(client, "watched", "now a page is open here").json()["id"]
        while stream.next("message").data["id"] != trigger:
            pass  # the lines before it, sent first to a new stream
        first = stream.next("draft", "message")
        assert first.event == "draft"
        assert first.data["reply_to"] == trigger
        assert stream.next("message").data["text"] == "echo: now a page is open here"
        assert fake_llm.chat_requests()[-1]["stream"] is True

    stream.close()
    wait_until(lambda: not deployment.feed.watched("watched"), timeout=30)
    with _client(deployment.gateway) as client:
        # A client that will open its stream after posting (a page's first message) asks.
        post_accepted(client, "watched", "stream it to me", stream=True)
        assert wait_replies(client, "watched", 3)[-1]["text"] == "echo: stream it to me"
        assert fake_llm.chat_requests()[-1]["stream"] is True


def test_resume_sends_only_the_missed_lines(
    deployment: Deployment, streams: Callable[..., EventReader]
) -> None:
    with _client(deployment.gateway) as client:
        post_accepted(client, "resume", "one")
        stream = streams(deployment.gateway, "resume")
        stream.next("message")
        seen = stream.next("message")
        stream.close()
        post_accepted(client, "resume", "two")
        resumed = streams(deployment.gateway, "resume", headers={"Last-Event-ID": seen.id})
        user = resumed.next("message")
        assert user.data["text"] == "two"
        reply = resumed.next("message")
        assert reply.data["text"] == "echo: two"

        by_query = streams(deployment.gateway, "resume", query=f"?after={user.data['id']}")
        assert by_query.next("message").data["id"] == reply.data["id"]


def test_a_conversation_never_started_is_not_found(
    deployment: Deployment, streams: Callable[..., EventReader]
) -> None:
    stream = streams(deployment.gateway, "nobody-here")
    assert stream.status_code == 404
