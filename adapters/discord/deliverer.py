"""Send replies to Discord over its REST API, with discord.py's own HTTP client.

The worker never opens a gateway connection: the deliverer logs a ``discord.Client`` in
(``GET /users/@me``) without connecting and posts through
:meth:`discord.Client.get_partial_messageable`, so requests, rate-limit buckets and 429
waits are discord.py's. A reply is converted to Discord Markdown and split under 2,000
characters; in groups its first message references the message it answers, in threads it
goes to the thread, and it never pings anyone but the person it answers.

Not sending twice: every part carries a nonce derived from the outbox id and its place in
the reply, sent with ``enforce_nonce``, so Discord answers a repeated post of it with the
message it created before instead of creating another. A post whose answer was lost (see
:func:`~adapters.discord.errors.delivery_error`) is therefore settled by posting it again,
but only while Discord still remembers the nonce ("the past few minutes" in its docs:
:data:`NONCE_WINDOW_SECONDS`); after that the outcome is unknown and nothing is resent.
429s are waited out in place (up to 30 s each); a later attempt starts after the parts
Discord is known to have. Every request is also paced fleet-wide (:mod:`adapters.discord.pacing`).

Streaming (:class:`~adapters.base.DraftEditor`, see :mod:`workers.streaming`): a draft is
posted like a part (with a fresh nonce, so a post whose answer was lost is settled by
posting it once more at once) and grows by message edits; drafts end with
:data:`~adapters.base.DRAFT_MARK`. The final delivery (``streamed_ids``) edits the drafts
into the formatted parts, posts the parts past them and deletes drafts left over. A draft
someone deleted (10008 Unknown Message) is replaced: the drafts after it are deleted and the
rest of the reply is posted as new parts, the first recorded in its place
(:class:`~adapters.base.DraftRecord`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from datetime import UTC, datetime
from functools import partial

import discord

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
from adapters.discord.chunks import MESSAGE_LIMIT, render_chunks, split_message
from adapters.discord.endpoints import use_api_base
from adapters.discord.errors import (
    SEND_FAILURES,
    created_nothing,
    delivery_error,
    describe,
    is_gone,
    is_invalid_form,
    is_transient,
    retry_after,
)
from adapters.discord.formatting import to_literal_text
from adapters.discord.ids import message_snowflake
from adapters.discord.indicator import TypingIndicators
from adapters.discord.pacing import DiscordPacing
from adapters.messages import ChatTarget, OutboundMessage

log = logging.getLogger(__name__)

TYPING_FAILURES: tuple[type[BaseException], ...] = (DeliveryError, *SEND_FAILURES)

MAX_RATE_LIMIT_WAIT_SECONDS = 30.0
"""Longest 429 ``retry_after`` waited out in place; longer ones go back to the outbox."""
DELIVERY_BUDGET_SECONDS = 80.0
"""Time one reply may take, 429 waits included; below the worker's 100 s send timeout, so
the deliverer, which knows how much was sent, is the one that reports the failure."""
POST_TIMEOUT_SECONDS = 40.0
"""How long one post waits for Discord's answer (429 waits included); after that Discord
may or may not have created the message."""
NONCE_WINDOW_SECONDS = 180.0
"""How long after an attempt began its nonces are trusted to make a repeated post a no-op.
Discord documents only "the past few minutes"; three minutes covers a retry after a lost
answer (seconds later) and after a dead worker's claim expired (about two minutes)."""
REPLY_MENTIONS = discord.AllowedMentions(
    everyone=False, users=False, roles=False, replied_user=True
)
"""A reply notifies the person it answers and nobody else, whatever the model wrote."""


class DiscordDeliverer(Deliverer, DraftEditor):
    """Delivers one bot's replies, their drafts and typing indicators through Discord's REST API."""

    post_timeout_seconds = POST_TIMEOUT_SECONDS
    nonce_window_seconds = NONCE_WINDOW_SECONDS
    draft_limit = MESSAGE_LIMIT

    @staticmethod
    def draft_length(text: str) -> int:
        """Discord counts code points; the draft mark is part of the message."""
        return len(text) + len(DRAFT_MARK)

    def __init__(self, config: BotConfig) -> None:
        super().__init__(config)
        if not config.token:
            raise ValueError("a Discord bot needs a token (HUBBUB_DISCORD_TOKEN)")
        self._token = config.token
        self._client: discord.Client | None = None
        self._login_lock: asyncio.Lock | None = None
        self._typing = TypingIndicators()

    async def initialize(self) -> None:
        """Point discord.py at the configured API; logging in waits for the first send.

        Raises:
            EndpointConfigError: ``api_base`` is not an http(s) URL.
        """
        use_api_base(self.config.api_base)

    async def shutdown(self) -> None:
        """Stop typing indicators and close the HTTP session."""
        await self._typing.close()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def deliver(
        self, message: OutboundMessage, drafts: DraftRecord | None = None
    ) -> list[str]:
        """Send the reply, split under Discord's limit; returns the message ids in order.

        A draft someone deleted (its edit answers 10008 Unknown Message) is replaced: the
        drafts after it are deleted and the rest of the reply is posted as new messages,
        the first of them recorded in ``drafts`` in the deleted draft's place.

        Raises:
            DeliveryError: Discord refused, could not be reached, or may have posted a part
                without saying so (retryable: the nonce settles it), or an unsettled part is
                older than the nonce window (unknown, final).
        """
        client = await self._logged_in()
        channel_id = message_snowflake(message.thread_id or message.chat_id)
        if channel_id is None:
            raise DeliveryError(f"not a Discord channel id: {message.chat_id!r}", retryable=False)
        self._typing.stop(channel_id)
        channel = client.get_partial_messageable(channel_id)
        chunks = render_chunks(message.text)
        if not chunks:
            raise DeliveryError("the reply is empty; Discord cannot post it", retryable=False)
        reference = _reference(channel, message.chat_type, message.reply_to_message_id)
        progress = DeliveryProgress(message)
        streamed = list(message.streamed_ids)
        if message.stream_unsettled:
            raise progress.unknown(
                "a draft of this reply (or the message replacing one) may or may not have been "
                "posted; not sent again, so nothing is sent twice"
            )
        edited = progress.chunks
        replacing: DraftRecord | None = None  # a deleted draft's replacement is due
        try:
            async with asyncio.timeout(DELIVERY_BUDGET_SECONDS):
                while edited < min(len(streamed), len(chunks)):
                    try:
                        await self._edit(channel, streamed[edited], chunks[edited])
                    except discord.NotFound as exc:
                        if drafts is None or not is_gone(exc):
                            raise
                        replacing = drafts
                        break
                    progress.delivered([streamed[edited]])
                    edited += 1
                for index in range(edited, len(chunks)):
                    self._check_nonce_window(message, progress)
                    nonce = _nonce(message.delivery_id, index)
                    to = reference if index == 0 else None
                    if replacing is None:
                        ids = await self._send(channel, chunks[index], to, nonce)
                    else:
                        streamed = await replacing.drop(
                            streamed, index, partial(self._delete, channel)
                        )
                        ids = await self._replace(
                            channel, chunks[index], to, nonce, replacing, progress
                        )
                        replacing = None
                    progress.delivered(ids)
        except SEND_FAILURES as exc:
            if progress.chunks < len(streamed):
                # An edit may always be made again: it never creates a message.
                raise progress.failure(
                    describe(exc), retryable=is_transient(exc), retry_after=retry_after(exc)
                ) from exc
            raise delivery_error(exc, progress) from exc
        for leftover in streamed[len(chunks) :]:
            await self._delete(channel, leftover)
        return progress.ids

    async def _replace(
        self,
        channel: discord.PartialMessageable,
        chunk: str,
        reference: discord.MessageReference | None,
        nonce: str,
        drafts: DraftRecord,
        progress: DeliveryProgress,
    ) -> list[str]:
        """Post a deleted draft's chunk as a new message and record it in the draft's place.

        A post whose answer was lost is posted once more with the same nonce, which
        Discord answers with the message it created, if it did.

        Raises:
            DeliveryError: ``maybe_sent`` and final: it may have been posted and could not
                be settled (the record stays unsettled).
            discord.DiscordException: Discord refused it (nothing was posted; recorded so).
        """
        try:
            ids = await self._send(channel, chunk, reference, nonce)
        except SEND_FAILURES as exc:
            if created_nothing(exc):
                await drafts.replaced(None)
                raise
            log.info("the answer to a deleted draft's replacement was lost; settling it by nonce")
            try:
                ids = await self._send(channel, chunk, reference, nonce)
            except SEND_FAILURES as again:
                raise progress.unknown(
                    f"{describe(again)}; the message replacing a deleted draft may have been "
                    "posted; not sent again, so nothing is sent twice"
                ) from again
        await drafts.replaced(ids[0])
        return ids

    async def post_draft(self, target: ChatTarget, text: str) -> str:
        """Post a draft (replying to the message it answers in groups); returns its id.

        A post whose answer was lost is posted once more with the same nonce, which
        Discord answers with the message it created, if it did.

        Raises:
            DeliveryError: refused or rate limited (``retry_after``), or ``maybe_sent``
                when the post may have arrived and could not be settled.
        """
        channel_id = message_snowflake(target.thread_id or target.chat_id)
        if channel_id is None:
            raise DeliveryError(f"not a Discord channel id: {target.chat_id!r}", retryable=False)
        self._typing.stop(channel_id)
        client = await self._logged_in()
        channel = client.get_partial_messageable(channel_id)
        reference = _reference(channel, target.chat_type, target.reply_to_message_id)
        text += DRAFT_MARK
        nonce = f"d{secrets.token_hex(12)}"
        try:
            sent = await self._post(channel, text, reference, nonce)
        except SEND_FAILURES as exc:
            if created_nothing(exc):
                raise DeliveryError(
                    describe(exc), retryable=is_transient(exc), retry_after=retry_after(exc)
                ) from exc
            log.info("a draft post's answer was lost; settling it by its nonce")
            try:
                sent = await self._post(channel, text, reference, nonce)
            except SEND_FAILURES as again:
                raise DeliveryError(
                    f"{describe(again)}; the draft may have been posted",
                    retryable=False,
                    maybe_sent=True,
                ) from again
        return str(sent.id)

    async def edit_draft(self, target: ChatTarget, message_id: str, text: str) -> None:
        """Replace a draft's text.

        Raises:
            MessageGone: the draft was deleted.
            DeliveryError: not edited (``retry_after`` when rate limited).
        """
        channel_id = message_snowflake(target.thread_id or target.chat_id)
        if channel_id is None:
            raise DeliveryError(f"not a Discord channel id: {target.chat_id!r}", retryable=False)
        client = await self._logged_in()
        channel = client.get_partial_messageable(channel_id)
        try:
            await self._edit(channel, message_id, text + DRAFT_MARK)
        except SEND_FAILURES as exc:
            if is_gone(exc):
                raise MessageGone(f"the draft was deleted: {describe(exc)}") from exc
            raise DeliveryError(
                describe(exc), retryable=is_transient(exc), retry_after=retry_after(exc)
            ) from exc

    def _check_nonce_window(self, message: OutboundMessage, progress: DeliveryProgress) -> None:
        """Refuse to repeat a post Discord may no longer recognise by its nonce."""
        since = message.unsettled_since
        if since is None:
            return
        age = (datetime.now(UTC) - since).total_seconds()
        if age > self.nonce_window_seconds:
            raise progress.unknown(
                f"an attempt {age:.0f}s ago may have posted message {progress.chunks + 1} of "
                "the reply, longer ago than Discord is trusted to remember its nonce; not "
                "resent, so nothing is sent twice"
            )

    async def send_typing(self, target: ChatTarget) -> None:
        """Show "typing…" in the chat until the reply arrives; failures are only logged."""
        channel_id = message_snowflake(target.thread_id or target.chat_id)
        if channel_id is None:
            return
        try:
            client = await self._logged_in()
            channel = client.get_partial_messageable(channel_id)
            await self._typing.start(channel_id, channel.typing)
        except TYPING_FAILURES:
            log.debug("Discord typing indicator failed", exc_info=True)

    async def _send(
        self,
        channel: discord.PartialMessageable,
        chunk: str,
        reference: discord.MessageReference | None,
        nonce: str,
    ) -> list[str]:
        """Post one chunk; the ids of the message(s) it became."""
        try:
            sent = await self._post(channel, chunk, reference, nonce)
        except discord.HTTPException as exc:
            if not is_invalid_form(exc):
                raise
            # Discord has no markup parse errors, but a body it refuses must not lose the
            # reply: send the text again with every Markdown character escaped.
            log.warning(
                "Discord refused a formatted message; sending it as literal text",
                extra={"channel_id": channel.id, "reason": describe(exc)},
            )
            ids = []
            for index, piece in enumerate(split_message(to_literal_text(chunk))):
                literal = await self._post(
                    channel, piece, reference if index == 0 else None, f"{nonce}L{index}"
                )
                ids.append(str(literal.id))
            return ids
        return [str(sent.id)]

    async def _post(
        self,
        channel: discord.PartialMessageable,
        text: str,
        reference: discord.MessageReference | None,
        nonce: str,
    ) -> discord.Message:
        async with asyncio.timeout(self.post_timeout_seconds):
            if reference is None:
                return await channel.send(text, allowed_mentions=REPLY_MENTIONS, nonce=nonce)
            return await channel.send(
                text, reference=reference, allowed_mentions=REPLY_MENTIONS, nonce=nonce
            )

    async def _edit(self, channel: discord.PartialMessageable, message_id: str, text: str) -> None:
        """Set a message's text; making the same edit again changes nothing."""
        message = channel.get_partial_message(int(message_id))
        async with asyncio.timeout(self.post_timeout_seconds):
            await message.edit(content=text, allowed_mentions=REPLY_MENTIONS)

    async def _delete(self, channel: discord.PartialMessageable, message_id: str) -> None:
        """Remove a draft the final reply did not need; failures are only logged."""
        try:
            async with asyncio.timeout(self.post_timeout_seconds):
                await channel.get_partial_message(int(message_id)).delete()
        except discord.NotFound:
            return
        except SEND_FAILURES as exc:
            log.warning("a leftover draft could not be deleted", extra={"reason": describe(exc)})

    async def _logged_in(self) -> discord.Client:
        if self._client is not None and not self._client.is_closed():
            return self._client
        if self._login_lock is None:
            self._login_lock = asyncio.Lock()
        async with self._login_lock:
            if self._client is not None and not self._client.is_closed():
                return self._client
            client = discord.Client(
                # No gateway connection; guilds only keeps discord.py's state from warning.
                intents=discord.Intents(guilds=True),
                max_ratelimit_timeout=MAX_RATE_LIMIT_WAIT_SECONDS,
                http_trace=DiscordPacing(self.pacer).trace(),
            )
            try:
                await client.login(self._token)
            except SEND_FAILURES as exc:
                await client.close()
                raise DeliveryError(
                    describe(exc),
                    retryable=is_transient(exc) and not isinstance(exc, discord.LoginFailure),
                ) from exc
            self._client = client
            return client


def _nonce(delivery_id: str, index: int) -> str:
    """The same for every attempt at the same part of the same reply (at most 25 chars).

    discord.py sends it with ``enforce_nonce``, so Discord answers a repeated post of the
    same part, within a few minutes, with the message it already created: a send whose
    answer was lost (timeout, dropped connection) cannot show up twice.
    """
    digest = hashlib.blake2b(f"{delivery_id}:{index}".encode(), digest_size=10).hexdigest()
    return f"h{digest}"


def _reference(
    channel: discord.PartialMessageable, chat_type: str, reply_to: str | None
) -> discord.MessageReference | None:
    """Reply to the triggering message in groups, when it is a Discord message."""
    if chat_type != "group" or reply_to is None:
        return None
    target = message_snowflake(reply_to)
    if target is None:
        return None
    return channel.get_partial_message(target).to_reference(fail_if_not_exists=False)
