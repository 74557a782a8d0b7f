"""The web chat's live stream: Server-Sent Events of a conversation's lines and drafts.

Lines always come from the database; the live feed only says when to look (and carries
drafts, which are never stored). So a stream that resumes (``Last-Event-ID`` or
``?after=``) gets exactly the lines stored after the last one it was sent, a dropped feed
event only delays a line, and with the feed away (Redis down) the stream reads the
database every second instead. Each ``message`` event's id is the highest line id the
stream has sent, which is what a reconnecting ``EventSource`` sends back.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from sse_starlette import EventSourceResponse, ServerSentEvent

from adapters.webchat.feed import DRAFT, Feed, FeedEvent, FeedUnavailable, Subscription
from adapters.webchat.formatting import to_html
from agent_core.errors import UnknownConversation
from gateway.dependencies import get_runtime
from gateway.errors import documented
from gateway.routes.webchat import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    ChatLine,
    ConversationId,
    browser_cookies,
    chat_address,
    read_conversation,
)
from gateway.routes.webchat_access import BrowserCookies
from workers.runtime import Runtime

log = logging.getLogger(__name__)

router = APIRouter(tags=["webchat"])

PING_SECONDS = 15.0
"""Keep-alive comments, so proxies and browsers keep an idle stream open."""
RETRY_MILLISECONDS = 2000
"""How long a browser waits before it reconnects a dropped stream."""
RECHECK_SECONDS = 10.0
"""With the feed up, the database is read this often anyway (a missed event costs this)."""
FALLBACK_POLL_SECONDS = 1.0
"""With the feed down, the database is read this often (the page's old poll)."""
RESUBSCRIBE_SECONDS = 15.0
"""How long a stream without its feed waits before it tries to subscribe again."""
WAKE_SECONDS = 1.0
"""The longest a stream sleeps before it checks for a shutdown."""
COMMIT_LAG_SECONDS = 10.0
"""Line ids are taken when a line is written, not when it commits: a line may become
visible after a later one. Each read looks this far back and skips lines already sent."""


class StreamShutdown:
    """Ends every open stream when the server starts to shut down.

    The server calls :meth:`close` before it waits for open connections to finish: an
    event stream never finishes by itself.
    """

    def __init__(self) -> None:
        self._closed = threading.Event()

    def close(self) -> None:
        """End the open streams at their next wake-up (within :data:`WAKE_SECONDS`)."""
        self._closed.set()

    @property
    def closed(self) -> bool:
        """Whether the server is shutting down."""
        return self._closed.is_set()


class _Cursor:
    """Which lines a stream has sent: the highest id, and the recent ids to skip."""

    def __init__(self, after: int | None) -> None:
        self.highest = after or 0
        self.floor = after
        """Read lines after this id; it trails the highest id by the commit lag."""
        self._sent: set[int] = set()
        self._marks: deque[tuple[float, int]] = deque()

    def fresh(self, lines: list[ChatLine]) -> list[ChatLine]:
        """The lines not sent yet; marks them sent."""
        new = [line for line in lines if int(line.id) not in self._sent]
        for line in new:
            self._sent.add(int(line.id))
            self.highest = max(self.highest, int(line.id))
        now = time.monotonic()
        self._marks.append((now, self.highest))
        while self._marks and now - self._marks[0][0] > COMMIT_LAG_SECONDS:
            _, mark = self._marks.popleft()
            self.floor = mark
            self._sent = {sent for sent in self._sent if sent > mark}
        return new


def _line_event(line: ChatLine, cursor: _Cursor) -> ServerSentEvent:
    return ServerSentEvent(data=line.model_dump_json(), event="message", id=str(cursor.highest))


def _draft_event(event: FeedEvent) -> ServerSentEvent | None:
    reply_to, text = event.data.get("reply_to"), event.data.get("text")
    if not isinstance(reply_to, str) or not isinstance(text, str):
        return None
    payload = {"reply_to": reply_to, "text": text, "html": to_html(text)}
    return ServerSentEvent(data=json.dumps(payload), event="draft")


def _state_event(pending: bool) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps({"pending": pending}), event="state")


class _Stream:
    """One browser's stream of one conversation."""

    def __init__(
        self,
        runtime: Runtime,
        feed: Feed,
        shutdown: StreamShutdown,
        address_key: str,
        chat_id: str,
        after: int | None,
    ) -> None:
        self._runtime = runtime
        self._feed = feed
        self._shutdown = shutdown
        self._key = address_key
        self._chat_id = chat_id
        self._cursor = _Cursor(after)
        self._pending: bool | None = None
        self._answered: set[str] = set()
        """Lines whose final reply was sent: a late draft of theirs is dropped."""

    async def _read(self, first: bool) -> list[ServerSentEvent]:
        floor = self._cursor.floor
        limit = DEFAULT_LIST_LIMIT if first and floor is None else MAX_LIST_LIMIT
        found = await run_in_threadpool(
            read_conversation, self._runtime, self._key, limit=limit, after_id=floor
        )
        if found is None:
            return []
        lines, pending = found
        events = []
        for line in self._cursor.fresh(lines):
            if line.reply_to is not None:
                self._answered.add(line.reply_to)
            events.append(_line_event(line, self._cursor))
        if pending != self._pending:
            self._pending = pending
            events.append(_state_event(pending))
        return events

    async def _subscribe(self, stack: AsyncExitStack) -> Subscription | None:
        try:
            return await stack.enter_async_context(self._feed.subscribe(self._chat_id))
        except FeedUnavailable:
            log.warning("web chat feed unavailable; the stream reads the database instead")
            return None

    async def events(self) -> AsyncIterator[ServerSentEvent]:
        """Lines stored since the cursor, then new lines and drafts until shutdown."""
        async with AsyncExitStack() as stack:
            subscription = await self._subscribe(stack)
            tried = time.monotonic()
            yield ServerSentEvent(comment="hubbub web chat", retry=RETRY_MILLISECONDS)
            for event in await self._read(first=True):
                yield event
            next_read = time.monotonic() + (
                RECHECK_SECONDS if subscription is not None else FALLBACK_POLL_SECONDS
            )
            while not self._shutdown.closed:
                feed_event: FeedEvent | None = None
                if subscription is not None:
                    wait = min(WAKE_SECONDS, max(next_read - time.monotonic(), 0.0))
                    try:
                        feed_event = await subscription.next_event(wait_seconds=wait)
                    except FeedUnavailable:
                        log.warning("web chat feed lost; the stream reads the database instead")
                        await stack.aclose()
                        subscription = None
                        tried = time.monotonic()
                else:
                    await anyio.sleep(min(WAKE_SECONDS, max(next_read - time.monotonic(), 0.0)))
                    if time.monotonic() - tried > RESUBSCRIBE_SECONDS:
                        subscription = await self._subscribe(stack)
                        tried = time.monotonic()
                if feed_event is not None and feed_event.type == DRAFT:
                    draft = _draft_event(feed_event)
                    if draft is not None and feed_event.data["reply_to"] not in self._answered:
                        yield draft
                    continue
                if feed_event is None and time.monotonic() < next_read:
                    continue
                for event in await self._read(first=False):
                    yield event
                next_read = time.monotonic() + (
                    RECHECK_SECONDS if subscription is not None else FALLBACK_POLL_SECONDS
                )


def _after(last_event_id: str | None, after: int | None) -> int | None:
    """The resume point: the browser's ``Last-Event-ID`` wins over the page's ``?after=``."""
    if last_event_id is not None and last_event_id.strip().isdigit():
        return int(last_event_id.strip())
    return after


@router.get(
    "/api/webchat/{conversation_id}/events",
    response_class=EventSourceResponse,
    responses={
        **documented(404, 422, 503),
        200: {
            "description": "Server-Sent Events: `message` (a stored line, like the messages "
            "API's items; its id resumes the stream), `draft` (`{reply_to, text, html}`: a "
            "reply so far), `state` (`{pending}`) and keep-alive comments.",
            "content": {"text/event-stream": {}},
        },
    },
)
async def conversation_events(
    conversation_id: ConversationId,
    request: Request,
    runtime: Annotated[Runtime, Depends(get_runtime)],
    cookies: Annotated[BrowserCookies | None, Depends(browser_cookies)],
    after: Annotated[
        int | None,
        Query(ge=0, description="send the lines stored after this line id (else the last 200)"),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(description="sent by a reconnecting EventSource; resumes like `after`"),
    ] = None,
) -> EventSourceResponse:
    """The conversation live: lines as they are stored, and replies while they are written.

    Access is the messages listing's: a conversation nothing was said in, or (public
    mode) another browser's, is not found.

    Raises:
        UnknownConversation: (404) as for the listing.
    """
    address = chat_address(request, runtime, cookies, conversation_id)
    if await run_in_threadpool(read_conversation, runtime, address.key, limit=1) is None:
        raise UnknownConversation(conversation_id)
    stream = _Stream(
        runtime,
        request.app.state.webchat_feed,
        request.app.state.webchat_streams,
        address.key,
        address.chat_id,
        _after(last_event_id, after),
    )
    return EventSourceResponse(
        stream.events(),
        ping=PING_SECONDS,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
