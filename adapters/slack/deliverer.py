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
- Streaming (:class:`~adapters.base.DraftEditor`, see :mod:`workers.streaming`): a draft
  is posted where the reply goes, as escaped plain text ending with
  :data:`~adapters.base.DRAFT_MARK` and with metadata naming the message it answers, and
  grows by ``chat.update``. A draft post whose answer was lost is looked for in the
  history; if it cannot be found yet, streaming stops and the final delivery reads the
  history for the drafts there. The final delivery edits the drafts into the mrkdwn
  chunks (which then carry the chunk metadata), posts the chunks past them and deletes
  drafts left over. A draft someone deleted (``message_not_found``) is replaced: the
  drafts after it are deleted and the rest of the reply is posted as new chunks, the first
  recorded in its place (:class:`~adapters.base.DraftRecord`).
- Typing: bots have no typing indicator; in threads the assistant status ("is
  thinking…") is shown where the workspace allows it, and Slack clears it on the reply.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.base import (
    DRAFT_MARK,
    BotConfig,
    Deliverer,
    DeliveryError,
    DeliveryProgress,
    DraftEditor,
    DraftRecord,
    MessageGone,
)
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
DRAFT_EVENT_TYPE = "hubbub_draft"
"""The ``metadata.event_type`` of a streamed reply's drafts (until the final edit)."""
GONE_ERROR = "message_not_found"
"""What ``chat.update`` and ``chat.delete`` answer for a message that is not there (any more)."""
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


def target_of(message: OutboundMessage | ChatTarget) -> _Target:
    """Where a reply (or its drafts) goes.

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


class _Gone(Exception):
    """The draft to edit was deleted: Slack's answer proves the update did not apply."""


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


def _draft_metadata(reply_to: str | None, nonce: str) -> dict[str, Any]:
    return {
        "event_type": DRAFT_EVENT_TYPE,
        "event_payload": {"reply_to": reply_to or "", "nonce": nonce},
    }


def _draft_of(posted: dict[str, Any], reply_to: str | None, identity: BotIdentity) -> str | None:
    """The nonce of a history message that is one of our drafts answering ``reply_to``."""
    if not identity.is_self(user=posted.get("user"), bot_id=posted.get("bot_id")):
        return None
    metadata = posted.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != DRAFT_EVENT_TYPE:
        return None
    payload = metadata.get("event_payload")
    if not isinstance(payload, dict) or payload.get("reply_to") != (reply_to or ""):
        return None
    nonce = payload.get("nonce")
    return nonce if isinstance(nonce, str) else None


def _draft_text(text: str) -> str:
    return escape(text) + DRAFT_MARK


class SlackDeliverer(Deliverer, DraftEditor):
    """Sends one bot's replies, and their drafts while they are written, to Slack.

    Args:
        config: the bot's config (token, API base).
        sleep: how to wait out a 429 (tests pass a recorder).
        limit: the longest message posted, in characters of mrkdwn.
        timeout: how long one Web API call waits for Slack's answer (default
            :attr:`api_timeout_seconds`); after that a post's outcome is unknown.
    """

    api_timeout_seconds = API_TIMEOUT_SECONDS
    draft_limit = MAX_MESSAGE_CHARS

    @staticmethod
    def draft_length(text: str) -> int:
        """What Slack gets: the escaped text and the draft mark."""
        return len(_draft_text(text))

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

    async def deliver(
        self, message: OutboundMessage, drafts: DraftRecord | None = None
    ) -> list[str]:
        """Post the reply; returns ``"{channel}:{ts}"`` per message of it.

        A draft someone deleted (``chat.update`` answers ``message_not_found``) is
        replaced: the drafts after it are deleted and the rest of the reply is posted as
        new messages, the first of them recorded in ``drafts`` in the deleted draft's place.

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
        streamed = await self._streamed(target, message, progress)
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
        edited = progress.chunks
        replacing: DraftRecord | None = None  # a deleted draft's replacement is due
        while edited < min(len(streamed), len(chunks)):
            try:
                await self._finish_draft(
                    target, streamed[edited], chunks, edited, message, progress
                )
            except _Gone as gone:
                if drafts is None:
                    raise progress.failure(str(gone), retryable=False) from gone
                replacing = drafts
                break
            progress.delivered([message_key(target.channel, streamed[edited])])
            edited += 1
        for index in range(edited, len(chunks)):
            ts = posted.get(index)
            if replacing is not None:
                streamed = await replacing.drop(streamed, index, partial(self._delete, target))
                if ts is None:
                    ts = await self._replace(
                        target, chunks, index, message, progress, budget, replacing
                    )
                else:  # an earlier attempt posted it: the history shows it
                    await replacing.replaced(message_key(target.channel, ts))
                replacing = None
            elif ts is None:
                ts = await self._post_chunk(target, chunks, index, message, progress, budget)
            progress.delivered([message_key(target.channel, ts)])
        for leftover in streamed[len(chunks) :]:
            await self._delete(target, leftover)
        return progress.ids

    async def _replace(
        self,
        target: _Target,
        chunks: list[Chunk],
        index: int,
        message: OutboundMessage,
        progress: DeliveryProgress,
        budget: list[float],
        drafts: DraftRecord,
    ) -> str:
        """Post a deleted draft's chunk as a new message, recorded in its place; its ``ts``.

        A post whose answer was lost is looked for in the history at once (by its chunk
        metadata).

        Raises:
            DeliveryError: not posted (recorded so), or ``maybe_sent`` and final when the
                history does not show it (yet): the record stays unsettled.
        """
        started = datetime.now(UTC)
        try:
            ts = await self._post_chunk(target, chunks, index, message, progress, budget)
        except DeliveryError as exc:
            if not exc.maybe_sent:
                await drafts.replaced(None)
                raise
            found = await self._settle_replacement(target, index, message, started, str(exc))
            if found is None:
                raise progress.unknown(
                    f"{exc}; the message replacing a deleted draft may have been posted; not "
                    "sent again, so nothing is sent twice"
                ) from exc
            ts = found
        await drafts.replaced(message_key(target.channel, ts))
        return ts

    async def _settle_replacement(
        self, target: _Target, index: int, message: OutboundMessage, since: datetime, reason: str
    ) -> str | None:
        """The ``ts`` of chunk ``index`` if the history shows it posted since ``since``."""
        try:
            found = await self._posted_chunks(target, message.delivery_id, since)
        except _Unsettled as exc:
            log.warning("the history could not settle a replacement post: %s; %s", reason, exc)
            return None
        if index in found:
            log.info("settled a replacement post's lost answer from the Slack history")
        return found.get(index)

    async def post_draft(self, target: ChatTarget, text: str) -> str:
        """Post a draft where the reply goes; returns its ``"{channel}:{ts}"``.

        Raises:
            DeliveryError: refused or rate limited (``retry_after``), or ``maybe_sent`` when
                the post may have arrived and the history does not show it (yet).
        """
        where = target_of(target)
        nonce = secrets.token_hex(8)
        started = time.time()
        try:
            response = await self._client.chat_postMessage(
                channel=where.channel,
                text=_draft_text(text),
                thread_ts=where.thread_ts,
                mrkdwn=False,
                metadata=_draft_metadata(target.reply_to_message_id, nonce),
            )
        except SlackApiError as exc:
            if exc.response.status_code == 429:
                raise DeliveryError(
                    "slack rate limit", retryable=True, retry_after=_retry_after(exc)
                ) from exc
            failure = call_failure(exc, "chat.postMessage")
            if failure.maybe_done:
                return await self._settle_draft(where, target, nonce, started, failure.reason)
            raise DeliveryError(failure.reason, retryable=failure.retryable) from exc
        except CALL_FAILURES as exc:
            failure = call_failure(exc, "chat.postMessage")
            if failure.maybe_done:
                return await self._settle_draft(where, target, nonce, started, failure.reason)
            raise DeliveryError(failure.reason, retryable=failure.retryable) from exc
        ts = response.get("ts")
        if not isinstance(ts, str):
            raise DeliveryError(
                "chat.postMessage answered without a ts", retryable=False, maybe_sent=True
            )
        return message_key(where.channel, ts)

    async def edit_draft(self, target: ChatTarget, message_id: str, text: str) -> None:
        """Replace a draft's text (``chat.update``).

        Raises:
            MessageGone: the draft was deleted.
            DeliveryError: not edited (``retry_after`` when rate limited).
        """
        ref = parse_key(message_id)
        if ref is None or ref.ts is None:
            raise DeliveryError(f"not a Slack message id: {message_id!r}", retryable=False)
        try:
            await self._client.chat_update(channel=ref.channel, ts=ref.ts, text=_draft_text(text))
        except SlackApiError as exc:
            if exc.response.status_code == 429:
                raise DeliveryError(
                    "slack rate limit", retryable=True, retry_after=_retry_after(exc)
                ) from exc
            failure = call_failure(exc, "chat.update")
            if error_code(exc) == GONE_ERROR:
                raise MessageGone(f"the draft was deleted: {failure.reason}") from exc
            raise DeliveryError(failure.reason, retryable=failure.retryable) from exc
        except CALL_FAILURES as exc:
            # An update may be made again: it never creates a message.
            raise DeliveryError(call_failure(exc, "chat.update").reason, retryable=True) from exc

    async def _settle_draft(
        self, where: _Target, target: ChatTarget, nonce: str, started: float, reason: str
    ) -> str:
        """The draft a post whose answer was lost created, found in the history.

        Raises:
            DeliveryError: ``maybe_sent``: not found (yet), or the history is unreadable.
        """
        since = datetime.fromtimestamp(started, tz=UTC)
        try:
            drafts = await self._drafts(where, target.reply_to_message_id, since)
            for ts, found in drafts.items():
                if found == nonce:
                    log.info("settled a draft post's lost answer from the Slack history")
                    return message_key(where.channel, ts)
        except _Unsettled as exc:
            reason = f"{reason}; {exc.reason}"
        raise DeliveryError(
            f"{reason}; the draft may have been posted", retryable=False, maybe_sent=True
        )

    async def _streamed(
        self, target: _Target, message: OutboundMessage, progress: DeliveryProgress
    ) -> list[str]:
        """The ts of the reply's drafts: as recorded, or as the history shows them.

        The history is read when a draft post's outcome was not settled.

        Raises:
            DeliveryError: the history could not be read.
        """
        if not message.stream_unsettled:
            return [_ts_of(key) for key in message.streamed_ids]
        ref = parse_key(message.reply_to_message_id)
        since = datetime.fromtimestamp(float(ref.ts) if ref and ref.ts else 0.0, tz=UTC)
        try:
            found = await self._drafts(target, message.reply_to_message_id, since)
        except _Unsettled as exc:
            raise progress.failure(
                f"could not tell from Slack's history which drafts of the reply were posted: "
                f"{exc.reason}",
                retryable=exc.retryable,
            ) from exc
        log.info(
            "settled a draft post's outcome from the Slack history",
            extra={"outbox_id": message.delivery_id, "drafts_found": len(found)},
        )
        return sorted(found, key=float)

    async def _drafts(
        self, target: _Target, reply_to: str | None, since: datetime
    ) -> dict[str, str]:
        """Our drafts answering ``reply_to`` in the thread or channel: ts -> nonce.

        Raises:
            _Unsettled: the history could not be read, or is too long to read through.
        """
        messages, identity = await self._history_since(target, since)
        found: dict[str, str] = {}
        for posted in messages:
            nonce = _draft_of(posted, reply_to, identity)
            if nonce is not None:
                found[str(posted["ts"])] = nonce
        return found

    async def _finish_draft(
        self,
        target: _Target,
        ts: str,
        chunks: list[Chunk],
        index: int,
        message: OutboundMessage,
        progress: DeliveryProgress,
    ) -> None:
        """Edit a draft into its chunk; an edit may always be made again."""
        text, plain = chunks[index].mrkdwn, False
        while True:
            try:
                await self._client.chat_update(
                    channel=target.channel, ts=ts, text=text, metadata=_metadata(message, index)
                )
                return
            except SlackApiError as exc:
                if exc.response.status_code == 429:
                    raise progress.failure(
                        "rate limited editing a draft into the reply",
                        retryable=True,
                        retry_after=_retry_after(exc),
                    ) from exc
                if error_code(exc) in FORMAT_ERRORS and not plain:
                    text, plain = escape(chunks[index].plain), True
                    continue
                if error_code(exc) == GONE_ERROR:
                    raise _Gone(call_failure(exc, "chat.update").reason) from exc
                failure = call_failure(exc, "chat.update")
                raise progress.failure(failure.reason, retryable=failure.retryable) from exc
            except CALL_FAILURES as exc:
                failure = call_failure(exc, "chat.update")
                raise progress.failure(failure.reason, retryable=True) from exc

    async def _delete(self, target: _Target, ts: str) -> None:
        """Remove a draft the final reply did not need; failures are only logged."""
        try:
            await self._client.chat_delete(channel=target.channel, ts=ts)
        except SlackApiError as exc:
            if error_code(exc) != GONE_ERROR:
                log.warning("a leftover draft could not be deleted: %s", error_code(exc))
        except CALL_FAILURES:
            log.warning("a leftover draft could not be deleted", exc_info=True)

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
        messages, identity = await self._history_since(target, since)
        found: dict[int, str] = {}
        for posted in messages:
            index = _chunk_of(posted, delivery_id, identity)
            if index is not None:
                found.setdefault(index, str(posted["ts"]))
        return found

    async def _history_since(
        self, target: _Target, since: datetime
    ) -> tuple[list[dict[str, Any]], BotIdentity]:
        """The thread's or channel's messages since ``since`` (with a margin), and who we are.

        Raises:
            _Unsettled: the history could not be read, or is too long to read through.
        """
        method = "conversations.replies" if target.thread_ts else "conversations.history"
        oldest = f"{since.timestamp() - HISTORY_MARGIN_SECONDS:.6f}"
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            identity = await self._identity.get()
            for _ in range(HISTORY_MAX_PAGES):
                page = await self._history_page(target, oldest, cursor)
                messages.extend(page.get("messages") or [])
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not page.get("has_more") or cursor is None:
                    return messages, identity
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


def _ts_of(key: str) -> str:
    ref = parse_key(key)
    return ref.ts if ref is not None and ref.ts is not None else key
