"""Post replies with ``chat.postMessage``: mrkdwn, split, threaded, each chunk exactly once.

- Where: a reply in a thread stays in its thread; a reply to a top-level message in a
  channel starts a thread under that message (Slack's way to say what it answers, and
  it keeps busy channels readable); a reply in a DM is posted in the DM.
- Rate limits: a 429 is waited out per chunk (its ``Retry-After``, within a budget), so a
  reply is never resent from the start because of one. Only while no chunk has gone out
  is a failure retryable; after that the error says how many chunks were sent.
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

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.base import BotConfig, Deliverer, DeliveryError
from adapters.messages import ChatTarget, OutboundMessage
from adapters.slack.chunks import MAX_MESSAGE_CHARS, Chunk, render_chunks
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
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
"""Refusals that say nothing was posted and a later try may work."""

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


def _error_code(exc: SlackApiError) -> str:
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    return str(data.get("error") or f"http_{exc.response.status_code}")


class SlackDeliverer(Deliverer):
    """Sends one bot's replies to Slack.

    Args:
        config: the bot's config (token, API base).
        sleep: how to wait out a 429 (tests pass a recorder).
        limit: the longest message posted, in characters of mrkdwn.
    """

    def __init__(
        self,
        config: BotConfig,
        *,
        sleep: Sleep = asyncio.sleep,
        limit: int = MAX_MESSAGE_CHARS,
    ) -> None:
        super().__init__(config)
        self._settings = SlackSettings.from_config(config)
        self._client = self._settings.web_client(timeout=API_TIMEOUT_SECONDS)
        self._sleep = sleep
        self._limit = limit
        self._status_supported = True

    async def deliver(self, message: OutboundMessage) -> list[str]:
        """Post the reply; returns ``"{channel}:{ts}"`` per message posted.

        Raises:
            DeliveryError: Slack refused or could not be reached; ``retryable`` only when
                nothing was posted.
        """
        chunks = render_chunks(message.text, self._limit)
        if not chunks:
            raise DeliveryError("the reply is empty; nothing to post", retryable=False)
        target = target_of(message)
        budget = [RATE_LIMIT_BUDGET_SECONDS]
        sent: list[str] = []
        for chunk in chunks:
            try:
                ts = await self._post(target, chunk, budget)
            except _RateLimited as exc:
                raise self._failure(
                    f"rate limited (retry after {exc.retry_after:g}s)",
                    sent,
                    len(chunks),
                    retryable=True,
                    retry_after=exc.retry_after,
                ) from None
            except SlackApiError as exc:
                code = _error_code(exc)
                transient = code in TRANSIENT_ERRORS or exc.response.status_code >= 500
                raise self._failure(
                    f"Slack refused chat.postMessage: {code}",
                    sent,
                    len(chunks),
                    retryable=transient,
                ) from exc
            except aiohttp.ClientConnectorError as exc:
                raise self._failure(
                    f"Slack unreachable: {exc}", sent, len(chunks), retryable=True
                ) from exc
            except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                # The request may have reached Slack: trying again could post it twice.
                raise self._failure(
                    f"no answer from Slack ({type(exc).__name__}); the message may or may not "
                    "have been posted",
                    sent,
                    len(chunks),
                    retryable=False,
                ) from exc
            sent.append(message_key(target.channel, ts))
        return sent

    @staticmethod
    def _failure(
        reason: str,
        sent: list[str],
        total: int,
        *,
        retryable: bool,
        retry_after: float | None = None,
    ) -> DeliveryError:
        if sent:
            return DeliveryError(
                f"{reason} after {len(sent)} of {total} chunks were posted; not retrying, "
                "so no chunk is posted twice",
                retryable=False,
            )
        return DeliveryError(reason, retryable=retryable, retry_after=retry_after)

    async def _post(self, target: _Target, chunk: Chunk, budget: list[float]) -> str:
        text, plain = chunk.mrkdwn, False
        while True:
            try:
                response = await self._client.chat_postMessage(
                    channel=target.channel,
                    text=text,
                    thread_ts=target.thread_ts,
                    mrkdwn=not plain,
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
                if _error_code(exc) in FORMAT_ERRORS and not plain:
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
                log.info("slack thread status unavailable: %s", _error_code(exc))
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError):
            log.debug("slack thread status failed", exc_info=True)
