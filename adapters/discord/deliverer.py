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
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import UTC, datetime

import discord

from adapters.base import BotConfig, Deliverer, DeliveryError, DeliveryProgress
from adapters.discord.chunks import render_chunks, split_message
from adapters.discord.endpoints import use_api_base
from adapters.discord.errors import (
    SEND_FAILURES,
    delivery_error,
    describe,
    is_invalid_form,
    is_transient,
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


class DiscordDeliverer(Deliverer):
    """Delivers one bot's replies and typing indicators through Discord's REST API."""

    post_timeout_seconds = POST_TIMEOUT_SECONDS
    nonce_window_seconds = NONCE_WINDOW_SECONDS

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

    async def deliver(self, message: OutboundMessage) -> list[str]:
        """Send the reply, split under Discord's limit; returns the message ids in order.

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
        reference = _reference(channel, message)
        progress = DeliveryProgress(message)
        try:
            async with asyncio.timeout(DELIVERY_BUDGET_SECONDS):
                for index in range(progress.chunks, len(chunks)):
                    self._check_nonce_window(message, progress)
                    nonce = _nonce(message.delivery_id, index)
                    ids = await self._send(
                        channel, chunks[index], reference if index == 0 else None, nonce
                    )
                    progress.delivered(ids)
        except SEND_FAILURES as exc:
            raise delivery_error(exc, progress) from exc
        return progress.ids

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
    channel: discord.PartialMessageable, message: OutboundMessage
) -> discord.MessageReference | None:
    """Reply to the triggering message in groups, when it is a Discord message."""
    if message.chat_type != "group" or message.reply_to_message_id is None:
        return None
    target = message_snowflake(message.reply_to_message_id)
    if target is None:
        return None
    return channel.get_partial_message(target).to_reference(fail_if_not_exists=False)
