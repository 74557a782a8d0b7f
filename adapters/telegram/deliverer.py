"""Send replies to Telegram: HTML chunks under the limit, 429s waited out, nothing sent twice.

A reply is rendered into chunks (:mod:`adapters.telegram.chunks`) and sent in order; in a
group the first chunk replies to the message that asked, in a forum topic every chunk goes
to the topic. Per chunk:

- ``429 Too Many Requests``: wait ``retry_after`` and send again, within a time budget.
- ``can't parse entities``: send the chunk as plain text; a reply is never lost
  to markup.
- ``ChatMigrated`` (a group became a supergroup): send to the new chat id.

A streamed reply (``streamed_ids``, see :mod:`workers.streaming`) is finished by editing its
draft messages into the chunks instead of sending them (``editMessageText``; "message is
not modified" is success, and an edit may always be repeated), then sending any chunks
past them and deleting drafts left over. A draft someone deleted ("message to edit not
found") is replaced: the drafts after it are deleted and the rest of the reply is sent as
new messages, the first recorded in its place (:class:`~adapters.base.DraftRecord`)
before the next attempt could edit it.

Never twice: only a failure that proves the chunk was not posted (refused, rate limited,
connection refused: :mod:`adapters.telegram.errors`) may be retried, and a retry starts
after the chunks already delivered. A chunk whose request may have arrived (a timeout, a
dropped connection, a 5xx) is never sent again: Telegram offers no way to find out, so
the reply's outcome is unknown, and so is that of an attempt that was interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, ChatMigrated, RetryAfter, TelegramError

from adapters.base import (
    BotConfig,
    Deliverer,
    DeliveryError,
    DeliveryProgress,
    DraftEditor,
    DraftRecord,
    MessageGone,
)
from adapters.messages import ChatTarget, OutboundMessage
from adapters.telegram.chunks import MESSAGE_LIMIT, Chunk, render_chunks, utf16_length
from adapters.telegram.client import READ_TIMEOUT_SECONDS, build_bot, retry_after_seconds
from adapters.telegram.errors import SendOutcome, send_outcome
from adapters.telegram.ids import compose_message_id, parse_message_id

log = logging.getLogger(__name__)

RATE_LIMIT_BUDGET_SECONDS = 40.0
"""Most time one delivery spends waiting out 429s (the worker gives a send 100 s in all)."""
TYPING_REFRESH_SECONDS = 4.0
"""Telegram shows "typing…" for 5 s, or until the bot's next message."""
TYPING_MAX_SECONDS = 120.0
"""Stop refreshing the indicator after this long even if no reply came (the turn failed)."""
PARSE_ERROR_MARKERS = ("can't parse entities", "can't find end of", "unsupported start tag")
NOT_MODIFIED_MARKER = "message is not modified"
GONE_MARKERS = ("message to delete not found", "message to edit not found")


def is_gone(error: BadRequest) -> bool:
    """Whether Telegram says the message to edit or delete does not exist (any more)."""
    text = error.message.lower()
    return any(marker in text for marker in GONE_MARKERS)


def is_parse_error(error: BadRequest) -> bool:
    """Whether Telegram refused a message because of its formatting."""
    text = error.message.lower()
    return any(marker in text for marker in PARSE_ERROR_MARKERS)


class _Gone(Exception):
    """The message to edit was deleted: Telegram's answer proves the edit did not apply."""


class _SendFailed(Exception):
    """One chunk could not be sent; carries what the delivery error needs."""

    def __init__(
        self,
        cause: TelegramError,
        *,
        retryable: bool,
        retry_after: float | None = None,
        maybe_sent: bool = False,
    ) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.retryable = retryable
        self.retry_after = retry_after
        self.maybe_sent = maybe_sent


@dataclass
class _WaitBudget:
    """Seconds left for waiting out rate limits during one delivery."""

    seconds: float

    def spend(self, wait: float) -> bool:
        if wait > self.seconds:
            return False
        self.seconds -= wait
        return True


class TelegramDeliverer(Deliverer, DraftEditor):
    """Delivers one bot's replies, their drafts and typing indicators through the Bot API.

    Raises:
        TelegramConfigError: at construction, when the bot has no token.
    """

    typing_refresh_seconds = TYPING_REFRESH_SECONDS
    typing_max_seconds = TYPING_MAX_SECONDS
    rate_limit_budget_seconds = RATE_LIMIT_BUDGET_SECONDS
    send_timeout_seconds = READ_TIMEOUT_SECONDS
    """How long one ``sendMessage`` waits for Telegram's answer; after that its outcome is
    unknown."""

    draft_limit = MESSAGE_LIMIT
    draft_length = staticmethod(utf16_length)

    def __init__(self, config: BotConfig) -> None:
        super().__init__(config)
        self._bot = build_bot(config, pacer=self.pacer)
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

    async def deliver(
        self, message: OutboundMessage, drafts: DraftRecord | None = None
    ) -> list[str]:
        """Send the reply; returns ``"{chat_id}:{message_id}"`` of every message of it.

        A draft someone deleted (its edit answers "message to edit not found") is replaced:
        the drafts after it are deleted and the rest of the reply is posted as new
        messages, the first of them recorded in ``drafts`` in the deleted draft's place.

        Raises:
            DeliveryError: a chunk could not be sent. Retryable (with ``retry_after`` for a
                429) when it proves the chunk was not posted; ``maybe_sent`` and final when
                it may have been, or when an interrupted attempt may have posted it.
        """
        self._stop_typing(message.chat_id, message.thread_id)
        progress = DeliveryProgress(message)
        if message.stream_unsettled:
            raise progress.unknown(
                "a draft of this reply (or the message replacing one) may have been posted "
                "without being recorded, and Telegram cannot tell; not sent again, so nothing "
                "is sent twice"
            )
        streamed = list(message.streamed_ids)
        chunks = render_chunks(message.text)
        chat_id = _current_chat(message)
        thread = int(message.thread_id) if message.thread_id else None
        reply = self._reply_parameters(message)
        budget = _WaitBudget(self.rate_limit_budget_seconds)
        edited = progress.chunks
        replacing: DraftRecord | None = None  # a deleted draft's replacement is due
        try:
            while edited < min(len(streamed), len(chunks)):
                try:
                    await self._edit(streamed[edited], chunks[edited], budget)
                except _Gone as gone:
                    if drafts is None:
                        raise progress.failure(str(gone), retryable=False) from gone
                    replacing = drafts
                    break
                progress.delivered([streamed[edited]])
                edited += 1
            # Past the drafts every chunk is a new message: an unsettled one cannot be resent.
            if edited < len(chunks) and progress.unsettled:
                raise progress.unknown(
                    "an earlier attempt was interrupted mid-send and Telegram cannot tell "
                    "whether it posted the reply; not resent, so nothing is sent twice"
                )
            if replacing is not None:
                streamed = await replacing.drop(streamed, edited, self._delete)
            for index in range(edited, len(chunks)):
                result = await self._send(
                    chat_id, chunks[index], thread, reply if index == 0 else None, budget
                )
                chat_id = str(result.chat_id)
                posted = compose_message_id(result.chat_id, result.message_id)
                if replacing is not None:
                    await replacing.replaced(posted)
                    replacing = None
                progress.delivered([posted])
        except _SendFailed as failure:
            if replacing is not None and not failure.maybe_sent:
                await replacing.replaced(None)
            raise _delivery_error(failure, progress, total=len(chunks)) from failure
        for leftover in streamed[len(chunks) :]:
            await self._delete(leftover)
        return progress.ids

    async def post_draft(self, target: ChatTarget, text: str) -> str:
        """Post a plain-text draft (in a group, quoting the message it answers).

        Raises:
            DeliveryError: refused or rate limited (``retry_after``), or ``maybe_sent``
                when the request may have arrived.
        """
        self._stop_typing(target.chat_id, target.thread_id)
        reply = None
        if target.chat_type == "group" and target.reply_to_message_id:
            reply = self._reply_parameters(
                OutboundMessage(
                    platform=target.platform,
                    chat_id=target.chat_id,
                    chat_type=target.chat_type,
                    text="",
                    reply_to_message_id=target.reply_to_message_id,
                    delivery_id="",
                )
            )
        try:
            result = await self._bot.send_message(
                chat_id=target.chat_id,
                text=text,
                message_thread_id=int(target.thread_id) if target.thread_id else None,
                reply_parameters=reply,
                read_timeout=self.send_timeout_seconds,
            )
        except RetryAfter as exc:
            raise DeliveryError(
                f"Telegram rate limit: {exc}", retryable=True, retry_after=retry_after_seconds(exc)
            ) from exc
        except TelegramError as exc:
            outcome = send_outcome(exc)
            raise DeliveryError(
                f"Telegram did not take the draft: {exc}",
                retryable=outcome is SendOutcome.NEVER_SENT,
                maybe_sent=outcome is SendOutcome.UNKNOWN,
            ) from exc
        return compose_message_id(result.chat_id, result.message_id)

    async def edit_draft(self, target: ChatTarget, message_id: str, text: str) -> None:
        """Replace a draft's text with plain ``text``.

        Raises:
            MessageGone: the draft was deleted.
            DeliveryError: not edited (``retry_after`` when rate limited).
        """
        chat_id, number = parse_message_id(message_id)
        try:
            await self._bot.edit_message_text(text=text, chat_id=chat_id, message_id=number)
        except RetryAfter as exc:
            raise DeliveryError(
                f"Telegram rate limit: {exc}", retryable=True, retry_after=retry_after_seconds(exc)
            ) from exc
        except BadRequest as exc:
            if is_gone(exc):
                raise MessageGone(f"the draft was deleted: {exc}") from exc
            if NOT_MODIFIED_MARKER not in exc.message.lower():
                raise DeliveryError(f"Telegram refused the edit: {exc}", retryable=False) from exc
        except TelegramError as exc:
            raise DeliveryError(f"Telegram edit failed: {exc}", retryable=True) from exc

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
                    read_timeout=self.send_timeout_seconds,
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
            except TelegramError as exc:
                outcome = send_outcome(exc)
                raise _SendFailed(
                    exc,
                    retryable=outcome is SendOutcome.NEVER_SENT,
                    maybe_sent=outcome is SendOutcome.UNKNOWN,
                ) from exc

    async def _edit(self, message_id: str, chunk: Chunk, budget: _WaitBudget) -> None:
        """Edit a streamed draft into its final chunk; repeating an edit is harmless."""
        chat_id, number = parse_message_id(message_id)
        as_html = bool(chunk.html.strip())
        while True:
            try:
                await self._bot.edit_message_text(
                    text=chunk.html if as_html else chunk.plain,
                    chat_id=chat_id,
                    message_id=number,
                    parse_mode=ParseMode.HTML if as_html else None,
                    read_timeout=self.send_timeout_seconds,
                )
                return
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if not budget.spend(wait):
                    raise _SendFailed(exc, retryable=True, retry_after=wait) from exc
                log.info("Telegram rate limit; waiting", extra={"retry_after": wait})
                await asyncio.sleep(wait)
            except BadRequest as exc:
                if NOT_MODIFIED_MARKER in exc.message.lower():
                    return
                if is_gone(exc):
                    raise _Gone(exc.message) from exc
                if not (as_html and is_parse_error(exc)):
                    raise _SendFailed(exc, retryable=False) from exc
                as_html = False
            except TelegramError as exc:
                # The edit may have arrived, but making it again changes nothing.
                raise _SendFailed(exc, retryable=True) from exc

    async def _delete(self, message_id: str) -> None:
        """Remove a draft the final reply did not need; one already gone is fine."""
        chat_id, number = parse_message_id(message_id)
        try:
            await self._bot.delete_message(chat_id=chat_id, message_id=number)
        except BadRequest as exc:
            if not is_gone(exc):
                log.warning("a leftover draft could not be deleted", extra={"error": exc.message})
        except TelegramError as exc:
            log.warning("a leftover draft could not be deleted", extra={"error": str(exc)})

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


def _current_chat(message: OutboundMessage) -> str:
    """Where the next chunk goes: the chat of the last delivered one (it may have migrated)."""
    if message.delivered_ids:
        try:
            return parse_message_id(message.delivered_ids[-1])[0]
        except ValueError:
            pass
    return message.chat_id


def _delivery_error(
    failure: _SendFailed, progress: DeliveryProgress, *, total: int
) -> DeliveryError:
    done = f"after {progress.chunks} of {total} chunks were delivered"
    if failure.maybe_sent:
        return progress.unknown(
            f"Telegram may or may not have posted the next chunk ({done}): {failure.cause}; "
            "not resent, so nothing is sent twice"
        )
    return progress.failure(
        f"Telegram did not take the reply ({done}): {failure.cause}",
        retryable=failure.retryable,
        retry_after=failure.retry_after if failure.retryable else None,
    )
