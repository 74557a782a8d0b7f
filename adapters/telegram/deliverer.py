"""Send replies to Telegram: HTML chunks under the limit, 429s waited out, nothing sent twice.

A reply is rendered into chunks (:mod:`adapters.telegram.chunks`) and sent in order; in a
group the first chunk replies to the message that asked, in a forum topic every chunk goes
to the topic. Per chunk:

- ``429 Too Many Requests``: wait ``retry_after`` and send again, within a time budget.
- ``can't parse entities``: send the chunk as plain text; a reply is never lost
  to markup.
- ``ChatMigrated`` (a group became a supergroup): send to the new chat id.

The delivery service retries a failed reply as a whole, so a failure is reported as
retryable only while no chunk has gone out; after that it is final and says how many
chunks were sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from adapters.base import BotConfig, Deliverer, DeliveryError
from adapters.messages import ChatTarget, OutboundMessage
from adapters.telegram.chunks import Chunk, render_chunks
from adapters.telegram.client import build_bot, retry_after_seconds
from adapters.telegram.ids import compose_message_id, parse_message_id

log = logging.getLogger(__name__)

RATE_LIMIT_BUDGET_SECONDS = 40.0
"""Most time one delivery spends waiting out 429s (the worker gives a send 100 s in all)."""
TYPING_REFRESH_SECONDS = 4.0
"""Telegram shows "typing…" for 5 s, or until the bot's next message."""
TYPING_MAX_SECONDS = 120.0
"""Stop refreshing the indicator after this long even if no reply came (the turn failed)."""
PARSE_ERROR_MARKERS = ("can't parse entities", "can't find end of", "unsupported start tag")


def is_parse_error(error: BadRequest) -> bool:
    """Whether Telegram refused a message because of its formatting."""
    text = error.message.lower()
    return any(marker in text for marker in PARSE_ERROR_MARKERS)


class _SendFailed(Exception):
    """One chunk could not be sent; carries what the delivery error needs."""

    def __init__(self, cause: TelegramError, *, retryable: bool, retry_after: float | None = None):
        super().__init__(str(cause))
        self.cause = cause
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass
class _WaitBudget:
    """Seconds left for waiting out rate limits during one delivery."""

    seconds: float

    def spend(self, wait: float) -> bool:
        if wait > self.seconds:
            return False
        self.seconds -= wait
        return True


class TelegramDeliverer(Deliverer):
    """Delivers one bot's replies and typing indicators through the Bot API.

    Raises:
        TelegramConfigError: at construction, when the bot has no token.
    """

    typing_refresh_seconds = TYPING_REFRESH_SECONDS
    typing_max_seconds = TYPING_MAX_SECONDS
    rate_limit_budget_seconds = RATE_LIMIT_BUDGET_SECONDS

    def __init__(self, config: BotConfig) -> None:
        super().__init__(config)
        self._bot = build_bot(config)
        self._typing: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def initialize(self) -> None:
        """Open the HTTP client and check the token (``getMe``).

        Raises:
            TelegramError: Telegram refused the token or could not be reached.
        """
        try:
            await self._bot.initialize()
        except BaseException:
            await self._bot.shutdown()
            raise

    async def shutdown(self) -> None:
        """Stop typing indicators and close the HTTP client."""
        tasks = list(self._typing.values())
        self._typing.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._bot.shutdown()

    async def deliver(self, message: OutboundMessage) -> list[str]:
        """Send the reply; returns ``"{chat_id}:{message_id}"`` of every message sent.

        Raises:
            DeliveryError: a chunk could not be sent. Retryable (with ``retry_after`` for a
                429) only when nothing was sent yet.
        """
        self._stop_typing(message.chat_id, message.thread_id)
        chunks = render_chunks(message.text)
        chat_id = message.chat_id
        thread = int(message.thread_id) if message.thread_id else None
        reply = self._reply_parameters(message)
        budget = _WaitBudget(self.rate_limit_budget_seconds)
        sent: list[str] = []
        for index, chunk in enumerate(chunks):
            try:
                result = await self._send(
                    chat_id, chunk, thread, reply if index == 0 else None, budget
                )
            except _SendFailed as failure:
                raise _delivery_error(failure, sent=len(sent), total=len(chunks)) from failure
            chat_id = str(result.chat_id)
            sent.append(compose_message_id(result.chat_id, result.message_id))
        return sent

    async def send_typing(self, target: ChatTarget) -> None:
        """Show "typing…" and keep it up until the reply to that chat is delivered."""
        self._stop_typing(target.chat_id, target.thread_id)
        if not await self._chat_action(target):
            return
        key = (target.chat_id, target.thread_id)
        task = asyncio.create_task(self._keep_typing(target))
        self._typing[key] = task
        task.add_done_callback(lambda done: self._forget_typing(key, done))

    def _reply_parameters(self, message: OutboundMessage) -> ReplyParameters | None:
        if message.chat_type != "group" or not message.reply_to_message_id:
            return None
        try:
            chat_id, message_id = parse_message_id(message.reply_to_message_id)
        except ValueError:
            log.warning(
                "reply target is not a Telegram message id",
                extra={"reply_to": message.reply_to_message_id},
            )
            return None
        if chat_id != message.chat_id:
            return None
        # If the user deleted their message meanwhile, answer anyway rather than fail.
        return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)

    async def _send(
        self,
        chat_id: str,
        chunk: Chunk,
        thread: int | None,
        reply: ReplyParameters | None,
        budget: _WaitBudget,
    ) -> Message:
        as_html = bool(chunk.html.strip())
        migrated = False
        while True:
            try:
                return await self._bot.send_message(
                    chat_id=chat_id,
                    text=chunk.html if as_html else chunk.plain,
                    parse_mode=ParseMode.HTML if as_html else None,
                    message_thread_id=thread,
                    reply_parameters=reply,
                )
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if not budget.spend(wait):
                    raise _SendFailed(exc, retryable=True, retry_after=wait) from exc
                log.info("Telegram rate limit; waiting", extra={"retry_after": wait})
                await asyncio.sleep(wait)
            except ChatMigrated as exc:
                if migrated:
                    raise _SendFailed(exc, retryable=False) from exc
                migrated = True
                log.info(
                    "Telegram group migrated to a supergroup",
                    extra={"old_chat_id": chat_id, "new_chat_id": exc.new_chat_id},
                )
                chat_id = str(exc.new_chat_id)
            except BadRequest as exc:
                if not (as_html and is_parse_error(exc)):
                    raise _SendFailed(exc, retryable=False) from exc
                log.warning(
                    "Telegram refused our HTML; sending the chunk as plain text",
                    extra={"error": exc.message},
                )
                as_html = False
            except (Forbidden, InvalidToken) as exc:
                raise _SendFailed(exc, retryable=False) from exc
            except NetworkError as exc:
                # Includes timeouts and Telegram's 5xx: worth another try, later.
                raise _SendFailed(exc, retryable=True) from exc
            except TelegramError as exc:
                raise _SendFailed(exc, retryable=False) from exc

    async def _chat_action(self, target: ChatTarget) -> bool:
        try:
            await self._bot.send_chat_action(
                chat_id=target.chat_id,
                action=ChatAction.TYPING,
                message_thread_id=int(target.thread_id) if target.thread_id else None,
            )
        except TelegramError as exc:
            log.debug("Telegram typing indicator failed", extra={"error": str(exc)})
            return False
        return True

    async def _keep_typing(self, target: ChatTarget) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.typing_max_seconds
        while True:
            await asyncio.sleep(self.typing_refresh_seconds)
            if loop.time() >= deadline or not await self._chat_action(target):
                return

    def _stop_typing(self, chat_id: str, thread_id: str) -> None:
        task = self._typing.pop((chat_id, thread_id), None)
        if task is not None:
            task.cancel()

    def _forget_typing(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._typing.get(key) is task:
            del self._typing[key]

    @property
    def typing_chats(self) -> Sequence[tuple[str, str]]:
        """``(chat_id, thread_id)`` of the chats whose typing indicator is kept up."""
        return tuple(self._typing)


def _delivery_error(failure: _SendFailed, *, sent: int, total: int) -> DeliveryError:
    if sent == 0:
        return DeliveryError(
            f"Telegram did not take the reply: {failure.cause}",
            retryable=failure.retryable,
            retry_after=failure.retry_after if failure.retryable else None,
        )
    return DeliveryError(
        f"Telegram stopped taking the reply after {sent} of {total} chunks were sent "
        f"(not retried, so nothing is sent twice): {failure.cause}",
        retryable=False,
    )
