"""The Bolt app that turns Slack events and slash commands into inbound messages.

One receiver serves a bot over either transport (Events API webhook or Socket Mode). Bolt
parses the requests, answers ``url_verification`` and ``ssl_check``, and routes events and
commands to the listeners here, which store the message (through the sink) before Bolt
acknowledges (``process_before_response``): an acknowledged event is never lost, and one
that could not be stored is answered 503 (HTTP) or left unacknowledged (Socket Mode), so
Slack sends it again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.response import BoltResponse

from adapters.base import BotConfig, InboundSink
from adapters.messages import InboundMessage
from adapters.slack.dedupe import Ledger, StillInProgress
from adapters.slack.events import EventNormaliser
from adapters.slack.identity import IdentityCache, IdentityUnavailable
from adapters.slack.settings import SlackSettings
from adapters.slack.threads import ThreadTracker
from adapters.slack.users import UserDirectory

log = logging.getLogger(__name__)

RECEIVE_API_TIMEOUT_SECONDS = 2.0
"""Calls made while Slack waits for the ack (``auth.test``, ``users.info``) must leave room
in its 3-second window."""
COMMAND_ACK = {"response_type": "in_channel"}
"""Slack then shows the person's command in the channel, above the bot's answer."""
COMMAND_FAILED_TEXT = "Sorry, I could not take that command just now. Please try again."
_ALL_EVENTS = re.compile(r".+")
_ALL_COMMANDS = re.compile(r"^/")

Ack = Callable[..., Awaitable[Any]]


def _unavailable(reason: str) -> BoltResponse:
    return BoltResponse(status=503, body={"error": reason})


class SlackReceiver:
    """A bot's Bolt app, its identity, and the memory that keeps Slack's copies out."""

    def __init__(self, config: BotConfig, settings: SlackSettings, sink: InboundSink) -> None:
        self.config = config
        self._settings = settings
        self._sink = sink
        client = settings.web_client(timeout=RECEIVE_API_TIMEOUT_SECONDS)
        self.identity = IdentityCache(client)
        self._users = UserDirectory(client)
        self._normaliser = EventNormaliser(config, self._users, ThreadTracker())
        self._events = Ledger()
        """Event ids done or under way: Slack's retries of one event."""
        self._messages = Ledger()
        """Message ids done or under way: ``app_mention`` and ``message`` for one post."""

        # Bolt passes arguments by parameter name and would pass ``self`` to a method.
        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            return await self._authorize(enterprise_id, team_id)

        self.app = AsyncApp(
            name=f"hubbub-slack-{config.bot_name}",
            logger=logging.getLogger("adapters.slack.bolt"),
            client=settings.web_client(timeout=RECEIVE_API_TIMEOUT_SECONDS, with_token=False),
            signing_secret=settings.signing_secret or "",
            authorize=authorize,
            process_before_response=True,
            # The webhook verifies the signature itself before dispatching (Bolt's check
            # raises on a malformed timestamp, which would answer 500).
            request_verification_enabled=False,
            # The bot's own messages are dropped by the normaliser, after they taught it
            # which threads it is in.
            ignoring_self_events_enabled=False,
        )
        self.app.event(_ALL_EVENTS)(self._on_event)
        self.app.command(_ALL_COMMANDS)(self._on_command)

    async def _authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        identity = await self.identity.get()
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id or identity.team_id,
            bot_token=self._settings.token,
            bot_id=identity.bot_id,
            bot_user_id=identity.user_id,
        )

    async def _store(self, inbound: InboundMessage) -> None:
        key = inbound.message_id if inbound.event == "message" else None
        async with self._messages.attempt(key) as fresh:
            if fresh:
                await self._sink(inbound)

    async def _on_event(self, body: dict[str, Any]) -> BoltResponse | None:
        event = body.get("event")
        if not isinstance(event, dict):
            return None
        try:
            async with self._events.attempt(body.get("event_id")) as fresh:
                if not fresh:
                    log.debug(
                        "slack event already handled", extra={"event_id": body.get("event_id")}
                    )
                    return None
                identity = await self.identity.get()
                inbound = await self._normaliser.from_event(event, identity)
                if inbound is not None:
                    await self._store(inbound)
        except StillInProgress:
            return _unavailable("this event is still being processed")
        except IdentityUnavailable as exc:
            log.warning("slack event not taken: %s", exc, extra={"bot": self.config.bot_name})
            return _unavailable("the bot's identity is not known yet")
        except Exception:
            log.exception("slack event could not be stored", extra={"bot": self.config.bot_name})
            return _unavailable("the event could not be stored")
        return None

    async def _on_command(self, ack: Ack, body: dict[str, Any]) -> None:
        try:
            inbound = await self._normaliser.from_command(body)
            if inbound is not None:
                await self._store(inbound)
        except Exception:
            log.exception("slack command could not be stored", extra={"bot": self.config.bot_name})
            await ack({"response_type": "ephemeral", "text": COMMAND_FAILED_TEXT})
            return
        await ack(COMMAND_ACK if inbound is not None else "")
