"""Accept what adapters receive: check it, store it once, ring for its turn.

Accepting writes the message to the database before anything is queued, so an accepted
message survives a broker restart or a crash: the sweeper finds it and rings again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from adapters.messages import InboundMessage
from agent_core import tracing
from agent_core.commands import is_command
from agent_core.compaction.triggers import BackgroundRing
from agent_core.db.engine import transaction
from agent_core.errors import InvalidInput, MessageTooLong
from agent_core.media.repository import ImageReference
from agent_core.sessions.service import (
    Conversation,
    IncomingMessage,
    record_delete,
    record_edit,
    record_incoming,
)
from agent_core.tenancy.settings import TenantDefaults
from agent_core.tokens import TokenCounter
from workers import metrics
from workers.bots import BotDirectory, BotRecord
from workers.dispatch import Dispatcher
from workers.inbound_limits import Asker, InboundLimiter, Verdict

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Accepted:
    """The stored message and whether it will get a turn."""

    message_id: int
    session_id: str
    duplicate: bool
    triggers: bool


def should_trigger(inbound: InboundMessage, *, trigger_mode: str, answer_bots: bool) -> bool:
    """Whether a message asks the bot for a reply.

    Private chats always do. In groups it depends on the bot's mode: ``all`` answers
    everything, ``commands`` only commands, ``mention`` (default) commands and messages
    that address the bot (a mention or a reply to it). Other bots are answered only
    when the bot is configured to.
    """
    if inbound.sender_is_bot and not answer_bots:
        return False
    if inbound.chat_type == "private" or trigger_mode == "all":
        return True
    if is_command(inbound.command):
        return True
    return trigger_mode == "mention" and inbound.addressed


def validate_text(text: str, max_chars: int, *, has_images: bool = False) -> None:
    """Refuse empty and oversized messages with a message a user understands.

    An image without a caption is a message of its own, not an empty one.

    Raises:
        InvalidInput: the text is blank and there is no image.
        MessageTooLong: the text is longer than ``max_chars``.
    """
    if not text.strip() and not has_images:
        raise InvalidInput("message text is empty")
    if len(text) > max_chars:
        raise MessageTooLong(len(text), max_chars)


class Intake:
    """The single entry for inbound messages from every adapter."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        bots: BotDirectory,
        counter: TokenCounter,
        dispatcher: Dispatcher,
        *,
        max_message_chars: int,
        background: Callable[[TenantDefaults], BackgroundRing | None] | None = None,
        limiter: InboundLimiter | None = None,
    ) -> None:
        self._factory = factory
        self._bots = bots
        self._counter = counter
        self._dispatcher = dispatcher
        self._max_chars = max_message_chars
        self._background = background
        self._limiter = limiter

    def accept(self, inbound: InboundMessage) -> Accepted | None:
        """Store the message (once) and schedule its turn.

        Returns ``None`` when the message is ignored: an unknown bot, or a sender or chat
        outside the bot's allowlist. Ignoring costs nothing and stores nothing. With
        tracing on, the message's trace starts here (or continues the HTTP caller's) and is
        stored with the message.

        Raises:
            InvalidInput: the message is empty or too long; nothing was stored.
        """
        if not tracing.enabled():
            return self._accept(inbound)
        # Inside a request that carried the caller's traceparent: its trace, else a new one.
        with tracing.span(
            "hubbub.inbound", root=not tracing.recording(), kind=tracing.SpanKind.SERVER
        ) as span:
            span.set_attributes(
                {
                    "hubbub.platform": inbound.platform,
                    "hubbub.tenant": inbound.tenant_id,
                    "hubbub.bot": inbound.bot_name,
                    "hubbub.event": inbound.event,
                }
            )
            accepted = self._accept(inbound)
            span.set_attribute("hubbub.ignored", accepted is None)
            if accepted is not None:
                span.set_attributes(
                    {
                        "hubbub.session_id": accepted.session_id,
                        "hubbub.message_id": accepted.message_id,
                        "hubbub.duplicate": accepted.duplicate,
                        "hubbub.triggers": accepted.triggers,
                    }
                )
            return accepted

    def _accept(self, inbound: InboundMessage) -> Accepted | None:
        if inbound.event != "delete":
            validate_text(
                inbound.text,
                self._max_chars,
                has_images=inbound.event == "message" and bool(inbound.images),
            )
        bot = self._bots.resolve(inbound.tenant_id, inbound.platform, inbound.bot_name)
        if bot is None or not self._allowed(bot, inbound):
            metrics.INBOUND.labels(inbound.platform, "ignored").inc()
            return None
        if inbound.event != "message":
            return self._apply_change(bot, inbound)
        incoming = self._limited(bot, inbound, self._incoming(bot, inbound))
        try:
            with transaction(self._factory) as db:
                result = record_incoming(db, incoming, self._counter)
        except DBAPIError as exc:
            # A concurrent copy of this platform message won (this attempt finds it), or
            # the pooled connection died with a database restart (this attempt reconnects).
            if not isinstance(exc, IntegrityError) and not exc.connection_invalidated:
                raise
            with transaction(self._factory) as db:
                result = record_incoming(db, incoming, self._counter)
        metrics.INBOUND.labels(
            inbound.platform, "duplicate" if result.duplicate else "accepted"
        ).inc()
        if result.triggers:
            self._ring(self._dispatcher.kick_session, result.session_id)
        elif not result.duplicate and self._background is not None:
            ring = self._background(bot.tenant)
            previous = result.active_tokens - result.message_tokens
            if ring is not None and ring.should_ring(
                result.active_tokens, previous, result.active_count
            ):
                self._ring(self._dispatcher.kick_compaction, result.session_id)
        return Accepted(result.message_id, result.session_id, result.duplicate, result.triggers)

    @staticmethod
    def _ring(kick: Callable[[str], None], session_id: str) -> None:
        """Ring the doorbell for a stored message; a failed ring only delays its turn.

        The message is committed already, so the sender is told it was accepted: answering
        an error would make it retry and hear "duplicate". The sweeper rings again.
        """
        try:
            kick(session_id)
        except Exception as exc:  # any broker failure: the work is durable in the database
            log.warning(
                "doorbell failed; the sweeper will ring again",
                extra={"session_id": session_id, "error": type(exc).__name__},
            )

    def _allowed(self, bot: BotRecord, inbound: InboundMessage) -> bool:
        config = self._bots.config(bot.id)
        # A delete names no sender on some platforms; the message passed the check when stored.
        if (
            config.allow_users
            and inbound.event != "delete"
            and (inbound.sender_id or "") not in config.allow_users
        ):
            return False
        return not (config.allow_chats and inbound.chat_id not in config.allow_chats)

    def _limited(
        self, bot: BotRecord, inbound: InboundMessage, incoming: IncomingMessage
    ) -> IncomingMessage:
        """The message as stored under the rate limits: over them, it asks for no turn.

        The first message over a limit in a window asks for a notice instead (answered
        without the model); later ones are context only, until the window frees up.
        """
        if self._limiter is None or not incoming.triggers:
            return incoming
        asker = Asker(bot.tenant_id, bot.id, inbound.chat_id, inbound.sender_id)
        verdict = self._limiter.check(asker)
        if verdict is Verdict.ALLOWED:
            return incoming
        metrics.INBOUND.labels(inbound.platform, "rate_limited").inc()
        if verdict is Verdict.LIMITED_TELL:
            return replace(incoming, meta={**(incoming.meta or {}), "rate_limited": True})
        return replace(incoming, triggers=False)

    def _incoming(self, bot: BotRecord, inbound: InboundMessage) -> IncomingMessage:
        triggers = should_trigger(
            inbound, trigger_mode=bot.trigger_mode, answer_bots=bot.answer_bots
        )
        # An unknown command asked of the bot is answered "unknown command", never sent to
        # the model; one it was not asked (another bot's, in a group) stays context.
        command = (
            inbound.command.lower()
            if inbound.command and (is_command(inbound.command) or triggers)
            else None
        )
        meta = dict(inbound.meta)
        traceparent = tracing.traceparent()
        if traceparent is not None:
            meta[tracing.TRACEPARENT] = traceparent
        if command is not None:
            meta.update(command=command, command_args=inbound.command_args)
        return IncomingMessage(
            conversation=Conversation(
                tenant_id=bot.tenant_id,
                bot_id=bot.id,
                platform=inbound.platform,
                chat_id=inbound.chat_id,
                thread_id=inbound.thread_id,
                chat_type=inbound.chat_type,
            ),
            text=inbound.text,
            platform_message_id=inbound.message_id,
            sender_id=inbound.sender_id,
            sender_name=inbound.sender_name,
            triggers=triggers,
            is_command=command is not None,
            reply_to_platform_id=inbound.reply_to_message_id,
            meta=meta,
            images=tuple(
                ImageReference(i.ref, i.filename, i.width, i.height) for i in inbound.images
            ),
        )

    def _apply_change(self, bot: BotRecord, inbound: InboundMessage) -> Accepted | None:
        if inbound.message_id is None:
            raise InvalidInput(f"an {inbound.event} event needs the id of the message it changes")
        with transaction(self._factory) as db:
            if inbound.event == "edit":
                message = record_edit(db, bot.id, inbound.message_id, inbound.text, self._counter)
            else:
                message = record_delete(db, bot.id, inbound.message_id)
        metrics.INBOUND.labels(inbound.platform, inbound.event).inc()
        if message is None:
            return None
        return Accepted(message.id, message.session_id, duplicate=False, triggers=False)
