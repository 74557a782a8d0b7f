"""One Slack bot's settings, read from its ``BotConfig``, and the Web API clients they make.

How a bot receives follows from its credentials: an app-level token (``xapp-…``) means
Socket Mode (Slack sends no HTTP events to an app in Socket Mode, so no webhook is served);
otherwise a signing secret means the Events API at ``/webhooks/slack/{bot_id}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import BotConfig
from adapters.pacing import BotPacer
from adapters.slack.pacing import PacedWebClient

DEFAULT_API_BASE = "https://slack.com/api/"
SIGNING_SECRET_KEY = "signing_secret"  # noqa: S105 (a dictionary key, not a secret)
"""``BotConfig.extra`` key of the Events API signing secret."""
APP_TOKEN_KEY = "app_token"  # noqa: S105 (a dictionary key, not a secret)
"""``BotConfig.extra`` key of the Socket Mode app-level token."""


class ReceiveMode(StrEnum):
    """How a bot receives Slack events."""

    SOCKET_MODE = "socket_mode"
    EVENTS_API = "events_api"


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """The credentials and endpoint of one Slack bot."""

    token: str = field(repr=False)
    """The bot token (``xoxb-…``)."""
    api_base: str = DEFAULT_API_BASE
    """The Web API base URL, ending in ``/`` (``https://slack.com/api/``)."""
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: BotConfig) -> SlackSettings:
        """Read a bot's settings.

        Raises:
            ValueError: the bot has no bot token.
        """
        if not config.token:
            raise ValueError(f"Slack bot {config.bot_name!r} has no bot token (xoxb-…)")
        base = config.api_base or DEFAULT_API_BASE
        return cls(
            token=config.token,
            api_base=base if base.endswith("/") else base + "/",
            signing_secret=config.extra.get(SIGNING_SECRET_KEY) or None,
            app_token=config.extra.get(APP_TOKEN_KEY) or None,
        )

    @property
    def receive_mode(self) -> ReceiveMode | None:
        """How the bot receives, or ``None`` when it can only send.

        Socket Mode when an app token is set, else the Events API when a signing secret is.
        """
        if self.app_token:
            return ReceiveMode.SOCKET_MODE
        if self.signing_secret:
            return ReceiveMode.EVENTS_API
        return None

    def web_client(
        self, *, timeout: float, with_token: bool = True, pacer: BotPacer | None = None
    ) -> AsyncWebClient:
        """A Web API client for this bot, paced by ``pacer`` when given (deliverers).

        It has no retry handlers: slack_sdk's default one resends after a dropped
        connection, which could post a message twice; callers decide what to retry.
        """
        token = self.token if with_token else None
        seconds = int(max(1, round(timeout)))
        if pacer is None:
            return AsyncWebClient(
                token=token, base_url=self.api_base, timeout=seconds, retry_handlers=[]
            )
        return PacedWebClient(
            pacer, token=token, base_url=self.api_base, timeout=seconds, retry_handlers=[]
        )
