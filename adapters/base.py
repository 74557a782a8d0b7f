"""What every platform adapter provides, and the errors it may raise.

Deliverers send replies; webhook handlers and listeners receive events and pass
``InboundMessage`` values to the gateway's sink.

::

    AdapterError
    ├── DeliveryError(retryable, retry_after)   sending a reply failed
    └── WebhookVerificationError(status)        an inbound request failed verification
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from adapters.messages import ChatTarget, InboundMessage, OutboundMessage

InboundSink = Callable[[InboundMessage], Awaitable[None]]
"""Where adapters hand what they receive: stores it durably and schedules its turn.

It returns once the message is stored (so a webhook may answer the platform right after),
never raises for bad input (it logs and drops it), and does no LLM work.
"""


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
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Platform-specific secrets and options (signing secret, app token, webhook secret)."""


class AdapterError(Exception):
    """Base of adapter errors."""


class DeliveryError(AdapterError):
    """A reply could not be delivered."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        """Whether trying again later may work (429, 5xx, network)."""
        self.retry_after = retry_after
        """Seconds the platform asked us to wait, when it said."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_delivery_error, (str(self), self.retryable, self.retry_after))


def _rebuild_delivery_error(
    message: str, retryable: bool, retry_after: float | None
) -> DeliveryError:
    return DeliveryError(message, retryable=retryable, retry_after=retry_after)


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

    def __init__(self, config: BotConfig) -> None:
        self.config = config

    async def initialize(self) -> None:  # noqa: B027 (optional hook)
        """Open clients; the default does nothing."""

    async def shutdown(self) -> None:  # noqa: B027 (optional hook)
        """Close clients; the default does nothing."""

    @abstractmethod
    async def deliver(self, message: OutboundMessage) -> list[str]:
        """Send the reply (split as the platform needs) and return the platform's message ids.

        Raises:
            DeliveryError: the platform refused or could not be reached.
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
        await self.shutdown()


@dataclass(frozen=True, slots=True)
class WebhookResponse:
    """What the gateway answers the platform."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"


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
