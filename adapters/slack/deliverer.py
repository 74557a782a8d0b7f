"""Post replies with ``chat.postMessage``: mrkdwn, split, threaded, each chunk exactly once.

- Where: a reply in a thread stays in its thread; a reply to a top-level message in a
  channel starts a thread under that message (Slack's way to say what it answers, and
  it keeps busy channels readable); a reply in a DM is posted in the DM.
- Rate limits: a 429 is waited out per chunk (its ``Retry-After``, within a budget), so a
  reply is never resent from the start because of one. A failure that proves nothing was
  posted (:mod:`adapters.slack.errors`) may be retried; the retry starts after the chunks
  already posted.
- Never twice: every chunk carries message ``metadata`` naming the reply (its outbox id)
  and its place in it. When an attempt may have posted a chunk without learning it (a
  timeout, a dropped connection, a 5xx), the next attempt first reads the thread's or
  channel's recent history (``conversations.replies`` / ``conversations.history``) and
  counts the chunks that are there as posted; only the absent ones are posted.
- Formatting: mrkdwn never fails to parse; if Slack still refuses a chunk's content, it is
  sent again as plain text.
- Typing: bots have no typing indicator; in threads the assistant status ("is
  thinking…") is shown where the workspace allows it, and Slack clears it on the reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.base import BotConfig, Deliverer, DeliveryError, DeliveryProgress
from adapters.messages import ChatTarget, OutboundMessage
from adapters.slack.chunks import MAX_MESSAGE_CHARS, Chunk, render_chunks
from adapters.slack.errors import CALL_FAILURES, call_failure, error_code
from adapters.slack.identity import BotIdentity, IdentityCache
from adapters.slack.ids import message_key, parse_key
from adapters.slack.mrkdwn import escape
from adapters.slack.settings import SlackSettings

log = logging.getLogger(__name__)

API_TIMEOUT_SECONDS = 15.0
RATE_LIMIT_BUDGET_SECONDS = 45.0
"""Total time one delivery may wait out 429s; well inside the delivery service's send
timeout, so a wait never turns into a timeout (and a resend)."""
DEFAULT_RETRY_AFTER_SECONDS = 1.0
"""When a 429 carries no ``Retry-After`` (Slack always sends one)."""
TYPING_STATUS = "is thinking…"
FORMAT_ERRORS = frozenset({"msg_too_long", "invalid_blocks", "invalid_blocks_format"})
"""Refusals about a chunk's content: worth one more try as plain text."""
REPLY_EVENT_TYPE = "hubbub_reply"
"""The ``metadata.event_type`` of every chunk Hubbub posts."""
HISTORY_MARGIN_SECONDS = 300.0
"""History is read from this long before the unsettled attempt began (clocks differ)."""
HISTORY_PAGE_SIZE = 200
HISTORY_MAX_PAGES = 5
"""A thread or channel busier than this since the attempt cannot be settled."""

Sleep = Callable[[float], Awaitable[None]]


class _RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class _Target:
    channel: str
    thread_ts: str | None


def target_of(message: OutboundMessage) -> _Target:
    """Where a reply goes.

    Its thread; else a new thread under the group message it answers; else the chat.
    """
    if message.thread_id:
        return _Target(message.chat_id, message.thread_id)
    ref = parse_key(message.reply_to_message_id)
    if message.chat_type == "group" and ref is not None and ref.channel == message.chat_id:
        return _Target(message.chat_id, ref.ts)
    return _Target(message.chat_id, None)


def _retry_after(exc: SlackApiError) -> float:
    value = exc.response.headers.get("Retry-After") if exc.response.headers else None
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER_SECONDS
    except ValueError:
        return DEFAULT_RETRY_AFTER_SECONDS


class _Unsettled(Exception):
    """The history could not tell which chunks an earlier attempt posted."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


def _metadata(message: OutboundMessage, index: int) -> dict[str, Any]:
    return {
        "event_type": REPLY_EVENT_TYPE,
        "event_payload": {"delivery_id": message.delivery_id, "chunk": index},
    }


def _chunk_of(posted: dict[str, Any], delivery_id: str, identity: BotIdentity) -> int | None:
    """Which chunk of reply ``delivery_id`` a history message is, if it is one we posted."""
    if not identity.is_self(user=posted.get("user"), bot_id=posted.get("bot_id")):
        return None
    metadata = posted.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != REPLY_EVENT_TYPE:
        return None
    payload = metadata.get("event_payload")
    if not isinstance(payload, dict) or payload.get("delivery_id") != delivery_id:
        return None
    chunk = payload.get("chunk")
    return chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else None


class SlackDeliverer(Deliverer):
    """Sends one bot's replies to Slack.

    Args:
        config: the bot's config (token, API base).
        sleep: how to wait out a 429 (tests pass a recorder).
        limit: the longest message posted, in characters of mrkdwn.
        timeout: how long one Web API call waits for Slack's answer (default
            :attr:`api_timeout_seconds`); after that a post's outcome is unknown.
    """

    api_timeout_seconds = API_TIMEOUT_SECONDS

    def __init__(
        self,
        config: BotConfig,
        *,
        sleep: Sleep = asyncio.sleep,
        limit: int = MAX_MESSAGE_CHARS,
        timeout: float | None = None,
    ) -> None:
        super().__init__(config)
        self._settings = SlackSettings.from_config(config)
        self._client = self._settings.web_client(
            timeout=timeout or self.api_timeout_seconds, pacer=self.pacer
        )
        self._identity = IdentityCache(self._client)
        self._sleep = sleep
        self._limit = limit
        self._status_supported = True

    async def deliver(self, message: OutboundMessage) -> list[str]:
        """Post the reply; returns ``"{channel}:{ts}"`` per message of it.

        Raises:
            DeliveryError: Slack refused or could not be reached (``retryable`` when a
                later attempt may work), or may have posted a chunk without saying so
                (``maybe_sent``; the next attempt settles it from the history).
        """
        chunks = render_chunks(message.text, self._limit)
        if not chunks:
            raise DeliveryError("the reply is empty; nothing to post", retryable=False)
        target = target_of(message)
        progress = DeliveryProgress(message)
        posted: dict[int, str] = {}
        if message.unsettled_since is not None:
            try:
                posted = await self._posted_chunks(
                    target, message.delivery_id, message.unsettled_since
                )
            except _Unsettled as exc:
                raise progress.failure(
                    f"could not tell from Slack's history whether an earlier attempt posted "
                    f"the reply: {exc.reason}",
                    retryable=exc.retryable,
                ) from exc
            progress.settled()
            log.info(
                "settled an unknown outcome from the Slack history",
                extra={"outbox_id": message.delivery_id, "chunks_found": len(posted)},
            )
        budget = [RATE_LIMIT_BUDGET_SECONDS]
        for index in range(progress.chunks, len(chunks)):
            ts = posted.get(index)
            if ts is None:
                ts = await self._post_chunk(target, chunks, index, message, progress, budget)
            progress.delivered([message_key(target.channel, ts)])
        return progress.ids

    async def _post_chunk(
        self,
        target: _Target,
        chunks: list[Chunk],
        index: int,
        message: OutboundMessage,
        progress: DeliveryProgress,
        budget: list[float],
    ) -> str:
        done = f"after {progress.chunks} of {len(chunks)} chunks were posted"
        try:
            return await self._post(target, chunks[index], budget, _metadata(message, index))
        except _RateLimited as exc:
            raise progress.failure(
                f"rate limited (retry after {exc.retry_after:g}s) {done}",
                retryable=True,
                retry_after=exc.retry_after,
            ) from None
        except CALL_FAILURES as exc:
            failure = call_failure(exc, "chat.postMessage")
            note = "; the next attempt looks for it in the history" if failure.maybe_done else ""
            raise progress.failure(
                f"{failure.reason} {done}{note}",
                retryable=failure.retryable,
                maybe_sent=failure.maybe_done,
            ) from exc

    async def _posted_chunks(
        self, target: _Target, delivery_id: str, since: datetime
    ) -> dict[int, str]:
        """The chunks of reply ``delivery_id`` that the thread or channel shows: index -> ts.

        Raises:
            _Unsettled: the history could not be read, or is too long to read through.
        """
        method = "conversations.replies" if target.thread_ts else "conversations.history"
        oldest = f"{since.timestamp() - HISTORY_MARGIN_SECONDS:.6f}"
        found: dict[int, str] = {}
        cursor: str | None = None
        try:
            identity = await self._identity.get()
            for _ in range(HISTORY_MAX_PAGES):
                page = await self._history_page(target, oldest, cursor)
                for posted in page.get("messages") or []:
                    index = _chunk_of(posted, delivery_id, identity)
                    if index is not None:
                        found.setdefault(index, str(posted["ts"]))
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not page.get("has_more") or cursor is None:
                    return found
        except CALL_FAILURES as exc:
            failure = call_failure(exc, method)
            raise _Unsettled(failure.reason, retryable=failure.retryable) from exc
        raise _Unsettled(
            f"more than {HISTORY_MAX_PAGES * HISTORY_PAGE_SIZE} messages since", retryable=False
        )

    async def _history_page(self, target: _Target, oldest: str, cursor: str | None) -> Any:
        if target.thread_ts:
            return await self._client.conversations_replies(
                channel=target.channel,
                ts=target.thread_ts,
                oldest=oldest,
                include_all_metadata=True,
                limit=HISTORY_PAGE_SIZE,
                cursor=cursor,
            )
        return await self._client.conversations_history(
            channel=target.channel,
            oldest=oldest,
            include_all_metadata=True,
            limit=HISTORY_PAGE_SIZE,
            cursor=cursor,
        )

    async def _post(
        self, target: _Target, chunk: Chunk, budget: list[float], metadata: dict[str, Any]
    ) -> str:
        text, plain = chunk.mrkdwn, False
        while True:
            try:
                response = await self._client.chat_postMessage(
                    channel=target.channel,
                    text=text,
                    thread_ts=target.thread_ts,
                    mrkdwn=not plain,
                    metadata=metadata,
                )
            except SlackApiError as exc:
                if exc.response.status_code == 429:
                    wait = _retry_after(exc)
                    if wait > budget[0]:
                        raise _RateLimited(wait) from None
                    budget[0] -= wait
                    log.info("slack rate limit; waiting", extra={"retry_after": wait})
                    await self._sleep(wait)
                    continue
                if error_code(exc) in FORMAT_ERRORS and not plain:
                    log.warning("slack refused the formatted text; sending it plain")
                    text, plain = escape(chunk.plain), True
                    continue
                raise
            ts = response.get("ts")
            if not isinstance(ts, str):
                raise SlackClientError("chat.postMessage answered without a ts")
            return ts

    async def send_typing(self, target: ChatTarget) -> None:
        """Show "is thinking…" in a thread, where Slack allows it; best effort."""
        if not target.thread_id or not self._status_supported:
            return
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=target.chat_id, thread_ts=target.thread_id, status=TYPING_STATUS
            )
        except SlackApiError as exc:
            if exc.response.status_code != 429:
                # Not an assistant-enabled app or workspace: stop asking.
                self._status_supported = False
                log.info("slack thread status unavailable: %s", error_code(exc))
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError):
            log.debug("slack thread status failed", exc_info=True)
