"""What every platform adapter provides, and the errors it may raise.

Deliverers send replies; webhook handlers and listeners receive events and pass
``InboundMessage`` values to the gateway's sink.

::

    AdapterError
    ├── DeliveryError(retryable, maybe_sent, delivered…)   sending a reply failed
    │   └── MessageGone                                    the message to edit was deleted
    └── WebhookVerificationError(status)                  an inbound request failed verification

A request whose answer was lost may have reached the platform. Only the deliverer knows
whether a failure proves nothing was sent (connection refused, a 429, a refusal) or not
(a timeout, a dropped connection, a 5xx the platform does not document): it says so in
the :class:`DeliveryError`, together with the chunks known delivered, so that a later
attempt neither loses nor repeats a chunk.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar

from adapters.messages import ChatTarget, InboundMessage, OutboundMessage
from adapters.pacing import BotPacer, PacingConfig, bot_scope

log = logging.getLogger(__name__)

InboundSink = Callable[[InboundMessage], Awaitable[None]]
"""Where adapters hand what they receive: stores it durably and schedules its turn.

It returns once the message is stored (so a webhook may answer the platform right after),
never raises for bad input (it logs and drops it), and does no LLM work.
"""


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Who may reach a bot: platform user ids and chat ids (an empty set: everyone)."""

    users: frozenset[str] = frozenset()
    chats: frozenset[str] = frozenset()

    def allows(self, user_id: str | None, chat_id: str) -> bool:
        """Whether a message from ``user_id`` in ``chat_id`` reaches the bot."""
        if self.users and (user_id or "") not in self.users:
            return False
        return not (self.chats and chat_id not in self.chats)


AllowlistSource = Callable[[], Awaitable[Allowlist]]
"""The bot's allowlist as it is now: tenant settings and bot config change while it runs."""


@dataclass(frozen=True, slots=True)
class BotConfig:
    """One bot's platform settings, as the adapter needs them."""

    platform: str
    bot_name: str = "default"
    tenant_id: str = "default"
    token: str | None = field(default=None, repr=False)
    api_base: str | None = None
    trigger_mode: str = "mention"
    answer_bots: bool = False
    allow_users: frozenset[str] = frozenset()
    allow_chats: frozenset[str] = frozenset()
    image_max_bytes: int | None = None
    """The largest image the deployment takes (``HUBBUB_IMAGE_MAX_BYTES``): where a platform
    offers several sizes of a photo, the largest one under it is chosen."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Platform-specific secrets and options (signing secret, app token, webhook secret)."""
    live_allowlist: AllowlistSource | None = field(default=None, repr=False, compare=False)
    """Where a receiver reads the allowlist before it spends work on an event (the gateway
    gives it one that follows changes); ``None``: the sets above, as configured at start."""

    async def allowlist(self) -> Allowlist:
        """The allowlist in force now."""
        if self.live_allowlist is not None:
            return await self.live_allowlist()
        return Allowlist(self.allow_users, self.allow_chats)

    pacing: PacingConfig = field(default_factory=PacingConfig)
    """The platform's rate limits for this bot, and where they are shared (unpaced when
    the config is built without settings)."""


class AdapterError(Exception):
    """Base of adapter errors."""


class DeliveryError(AdapterError):
    """A reply could not be delivered, or not all of it; what the deliverer knows of it."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        maybe_sent: bool = False,
        delivered_chunks: int = 0,
        delivered_ids: Iterable[str] = (),
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        """Whether another attempt may work and is safe: for a ``maybe_sent`` failure, that
        the deliverer can settle the outcome first (a nonce, the channel's history)."""
        self.retry_after = retry_after
        """Seconds the platform asked us to wait, when it said."""
        self.maybe_sent = maybe_sent
        """The chunk after the delivered ones may have reached the platform: the outcome is
        unknown until an attempt settles it (never by sending it blindly again)."""
        self.delivered_chunks = delivered_chunks
        """Leading chunks the platform is known to have, earlier attempts included."""
        self.delivered_ids = tuple(delivered_ids)
        """The platform's ids of those chunks' messages."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_delivery_error,
            (
                str(self),
                self.retryable,
                self.retry_after,
                self.maybe_sent,
                self.delivered_chunks,
                self.delivered_ids,
            ),
        )


def _rebuild_delivery_error(
    message: str,
    retryable: bool,
    retry_after: float | None,
    maybe_sent: bool,
    delivered_chunks: int,
    delivered_ids: tuple[str, ...],
) -> DeliveryError:
    return DeliveryError(
        message,
        retryable=retryable,
        retry_after=retry_after,
        maybe_sent=maybe_sent,
        delivered_chunks=delivered_chunks,
        delivered_ids=delivered_ids,
    )


class MessageGone(DeliveryError):
    """The message to edit no longer exists (a person deleted it): the edit did not apply.

    The platform's answer proves it, so the text may go out in a new message instead.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageGone, (str(self),))


class DeliveryProgress:
    """Which chunks of one reply the platform has, across attempts, and what is unsettled.

    A deliverer starts one from the message (the chunks earlier attempts delivered), adds
    each chunk it delivers, and builds its errors from it, so every error carries the
    progress and stays unsettled while an earlier attempt's outcome is not settled.
    """

    __slots__ = ("chunks", "ids", "unsettled")

    def __init__(self, message: OutboundMessage) -> None:
        self.chunks = message.delivered_chunks
        self.ids = list(message.delivered_ids)
        self.unsettled = message.unsettled_since is not None
        """An earlier attempt may have posted chunks from ``chunks`` on."""

    def delivered(self, ids: Iterable[str]) -> None:
        """The next chunk is on the platform, as these messages."""
        self.chunks += 1
        self.ids.extend(ids)

    def settled(self) -> None:
        """The earlier attempt's outcome is known now (what it posted was counted)."""
        self.unsettled = False

    def failure(
        self,
        reason: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        maybe_sent: bool = False,
    ) -> DeliveryError:
        """The error for a failure now; ``maybe_sent`` when its request may have arrived."""
        return DeliveryError(
            reason,
            retryable=retryable,
            retry_after=retry_after,
            maybe_sent=maybe_sent or self.unsettled,
            delivered_chunks=self.chunks,
            delivered_ids=self.ids,
        )

    def unknown(self, reason: str) -> DeliveryError:
        """The outcome of a request that may have arrived cannot be settled: never resent."""
        return self.failure(reason, retryable=False, maybe_sent=True)


class WebhookVerificationError(AdapterError):
    """An inbound webhook failed its signature or secret check; nothing was enqueued."""

    def __init__(self, message: str, status_code: int = 401) -> None:
        super().__init__(message, status_code)
        self.status_code = status_code

    def __str__(self) -> str:
        return str(self.args[0])


class Deliverer(ABC):
    """Sends replies to one bot's platform. Used as an async context manager.

    ``initialize`` opens connections; if it fails, ``shutdown`` runs before the error
    propagates.
    """

    local: ClassVar[bool] = False
    """Delivery never leaves this process (web chat): repeating it is harmless, so the
    delivery service need not wait for the disk to record its outcome."""

    def __init__(self, config: BotConfig) -> None:
        self.config = config
        self.pacer = BotPacer(config.pacing, bot_scope(config.platform, config.token))
        """The bot's share of the fleet-wide rate limits: the platform client a deliverer
        builds asks it before every call (``adapters/<platform>/pacing.py``), so replies
        and streamed drafts count against the same buckets."""

    async def initialize(self) -> None:  # noqa: B027 (optional hook)
        """Open clients; the default does nothing."""

    async def shutdown(self) -> None:  # noqa: B027 (optional hook)
        """Close clients; the default does nothing."""

    @abstractmethod
    async def deliver(
        self, message: OutboundMessage, drafts: DraftRecord | None = None
    ) -> list[str]:
        """Send the reply (split as the platform needs) and return the platform's message ids.

        Chunks before ``message.delivered_chunks`` are not sent again; their ids lead the
        result. When ``message.unsettled_since`` is set, an earlier attempt may have posted
        the following chunks: the deliverer settles that before sending them, or raises.
        A streamed draft someone deleted is replaced by a new message, recorded in
        ``drafts`` (without it, the deletion fails the delivery).

        Raises:
            DeliveryError: the platform refused, could not be reached, or may have the
                reply without saying so; it tells what is known (see its attributes).
        """

    async def send_typing(self, target: ChatTarget) -> None:  # noqa: B027 (optional hook)
        """Show that a reply is being written; best effort, the default does nothing."""

    async def __aenter__(self) -> Deliverer:
        try:
            await self.initialize()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.shutdown()
        finally:
            await self.pacer.close()


RETRY_LATER_SECONDS = 5
"""What a 503 tells a platform (or the page) to wait before it retries."""


DRAFT_MARK = " ▌"
"""Ends every draft on platforms whose final text may read exactly like the last draft
(Discord, Slack): it says the reply is still being written, and the final edit, which
drops it, always changes the message."""


class DraftRecord(ABC):
    """Where a final delivery records the new message that replaces a deleted draft.

    The record is what a later attempt edits (``streamed_ids``): it must say a replacement
    is under way before the post leaves, and name it right after, so that an attempt that
    runs again edits the new message and never posts another.
    """

    @abstractmethod
    async def replacing(self, part: int) -> None:
        """Record, durably and before the post, that draft ``part`` is being replaced.

        The drafts from ``part`` on are no longer the reply's, and a new message for
        ``part`` may appear: the record is unsettled until :meth:`replaced`.
        """

    @abstractmethod
    async def replaced(self, message_id: str | None) -> None:
        """The new message for the part is ``message_id``; ``None``: it was not posted."""

    async def drop(
        self, streamed: list[str], index: int, delete: Callable[[str], Awaitable[None]]
    ) -> list[str]:
        """Draft ``index`` is gone: ``delete`` the drafts after it and record its replacing.

        Returns the drafts the reply still has (those before ``index``).
        """
        log.info(
            "a streamed draft was deleted; the rest of the reply goes out as new messages",
            extra={"part": index},
        )
        for leftover in streamed[index + 1 :]:
            await delete(leftover)
        await self.replacing(index)
        return streamed[:index]


class DraftEditor(ABC):
    """What a deliverer that streams replies adds: post a draft message, then edit it.

    Drafts are plain text; the final delivery (:meth:`Deliverer.deliver` with
    ``streamed_ids``) edits them into the formatted reply. An edit is idempotent, so a
    failed one may always be tried again; a post whose request may have arrived may not.
    """

    draft_limit: ClassVar[int]
    """Most characters one draft message holds, as :meth:`draft_length` counts them."""

    @staticmethod
    def draft_length(text: str) -> int:
        """The length of ``text`` as the platform counts it (characters by default)."""
        return len(text)

    @abstractmethod
    async def post_draft(self, target: ChatTarget, text: str) -> str:
        """Post a new draft message; returns its id (the form ``deliver`` returns).

        Raises:
            DeliveryError: not posted (``maybe_sent`` when it may have been anyway).
        """

    @abstractmethod
    async def edit_draft(self, target: ChatTarget, message_id: str, text: str) -> None:
        """Replace a draft message's text (unchanged text is no error).

        Raises:
            MessageGone: the draft was deleted.
            DeliveryError: not edited; ``retry_after`` when rate limited.
        """


@dataclass(frozen=True, slots=True)
class WebhookResponse:
    """What the gateway answers the platform."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    retry_after: int | None = None
    """Seconds after which a retry may succeed (sent as ``Retry-After``)."""

    @classmethod
    def unavailable(cls, error: str) -> WebhookResponse:
        """A 503 that tells the platform when to retry: nothing was stored."""
        return cls(
            status=503,
            body=json.dumps({"error": error}).encode(),
            retry_after=RETRY_LATER_SECONDS,
        )


class WebhookHandler(ABC):
    """Receives one bot's platform webhooks at ``/webhooks/{platform}/{bot_id}``.

    Framework-neutral: the gateway passes headers (lower-cased names) and the raw body.
    """

    def __init__(self, config: BotConfig, sink: InboundSink) -> None:
        self.config = config
        self.sink = sink

    async def initialize(self) -> None:  # noqa: B027 (optional hook)
        """Prepare (e.g. learn the bot's own user id); the default does nothing."""

    async def shutdown(self) -> None:  # noqa: B027 (optional hook)
        """Release clients; the default does nothing."""

    @abstractmethod
    async def handle(self, headers: Mapping[str, str], body: bytes) -> WebhookResponse:
        """Verify, parse and hand the event to the sink; answer quickly.

        Raises:
            WebhookVerificationError: signature or secret check failed; nothing enqueued.
        """


class Listener(ABC):
    """A long-lived connection that receives one bot's events (polling, websocket).

    The gateway runs :meth:`run` as a task, restarts it with back-off when it raises,
    and cancels it on shutdown.
    """

    def __init__(self, config: BotConfig, sink: InboundSink) -> None:
        self.config = config
        self.sink = sink

    @abstractmethod
    async def run(self) -> None:
        """Receive events until cancelled; raise to be restarted after a back-off."""
