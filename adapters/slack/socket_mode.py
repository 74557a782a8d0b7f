"""Socket Mode: Slack events over a websocket, for bots without a public URL.

``apps.connections.open`` (with the app-level ``xapp-…`` token) hands out a websocket URL;
Slack sends ``hello`` and then envelopes (``events_api``, ``slash_commands``), each
acknowledged with its ``envelope_id`` once the message is stored. slack_sdk's client pings
the socket and reconnects by itself when Slack asks it to (``disconnect``) or the
connection goes stale; the gateway restarts the listener if it fails to start.
"""

from __future__ import annotations

import asyncio
import logging

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from adapters.base import BotConfig, InboundSink, Listener
from adapters.slack.receiver import RECEIVE_API_TIMEOUT_SECONDS, SlackReceiver
from adapters.slack.settings import SlackSettings

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 30.0
"""slack_sdk retries a failing connect forever with the same URL; past this the listener
fails and the gateway starts it again, which asks Slack for a fresh URL."""
PING_INTERVAL_SECONDS = 10.0


class SlackSocketModeListener(Listener):
    """Receives one bot's events over Socket Mode until cancelled.

    Raises:
        ValueError: the bot has no app-level token.
    """

    def __init__(
        self,
        config: BotConfig,
        sink: InboundSink,
        *,
        settings: SlackSettings | None = None,
        ping_interval: float = PING_INTERVAL_SECONDS,
    ) -> None:
        super().__init__(config, sink)
        self._settings = settings or SlackSettings.from_config(config)
        if not self._settings.app_token:
            raise ValueError(f"Slack bot {config.bot_name!r} has no app-level token (xapp-…)")
        self._ping_interval = ping_interval
        self.receiver = SlackReceiver(config, self._settings, sink)
        self.connected = asyncio.Event()
        """Set while a websocket session is open (for health checks and tests)."""

    async def run(self) -> None:
        """Connect and receive until cancelled.

        Raises:
            IdentityUnavailable: ``auth.test`` failed (bad bot token, Slack unreachable).
            slack_sdk.errors.SlackApiError: ``apps.connections.open`` refused the app token.
            TimeoutError: no websocket session could be opened in time.
        """
        await self.receiver.identity.get()
        assert self._settings.app_token is not None
        handler = AsyncSocketModeHandler(
            self.receiver.app,
            app_token=self._settings.app_token,
            web_client=self._settings.web_client(
                timeout=RECEIVE_API_TIMEOUT_SECONDS * 5, with_token=False
            ),
            ping_interval=self._ping_interval,
        )
        try:
            # Asking for the URL first turns a refused app token into an error here,
            # instead of slack_sdk retrying it forever inside connect().
            handler.client.wss_uri = await handler.client.issue_new_wss_url()
            connect = handler.connect_async()  # type: ignore[no-untyped-call]  # Bolt is untyped
            await asyncio.wait_for(connect, CONNECT_TIMEOUT_SECONDS)
            self.connected.set()
            log.info("slack socket mode connected", extra={"bot": self.config.bot_name})
            await asyncio.Event().wait()
        finally:
            self.connected.clear()
            await handler.close_async()  # type: ignore[no-untyped-call]  # Bolt is untyped
