"""The Events API endpoint: ``POST /webhooks/slack/{bot_id}`` (events and slash commands).

Every request is checked against the signing secret before anything else happens: the
``X-Slack-Signature`` HMAC of ``v0:{timestamp}:{body}`` must match and the timestamp must
be within five minutes, or the request gets a 401 and nothing is stored. Verified requests
go to the bot's Bolt app, which answers once the message is stored.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Mapping

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.internals import (
    build_normalized_headers,
    extract_content_type,
    parse_body,
)
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

from adapters.base import (
    BotConfig,
    InboundSink,
    WebhookHandler,
    WebhookResponse,
    WebhookVerificationError,
)
from adapters.slack.identity import IdentityUnavailable
from adapters.slack.receiver import SlackReceiver
from adapters.slack.settings import SlackSettings

log = logging.getLogger(__name__)

SIGNATURE_WINDOW_SECONDS = 300
"""Slack's replay window: older (or future) timestamps are refused."""
_NO_IDENTITY_NEEDED = frozenset({"url_verification", "ssl_check"})
_TIMESTAMP = re.compile(r"[0-9]{1,12}", re.ASCII)
"""Unix seconds as Slack sends them: ASCII digits only, and short, so that ``int()`` never
sees ``²`` (a digit to ``str.isdigit``) or thousands of digits (past Python's limit)."""


def _json(status: int, payload: dict[str, str]) -> WebhookResponse:
    return WebhookResponse(status=status, body=json.dumps(payload).encode())


def _rate_limit(request: AsyncBoltRequest) -> dict[str, object]:
    return {"minute_rate_limited": request.body.get("minute_rate_limited")}


def _to_webhook_response(response: BoltResponse) -> WebhookResponse:
    content_type = response.headers.get("content-type", ["application/json"])[0]
    body = response.body if isinstance(response.body, str) else json.dumps(response.body)
    return WebhookResponse(status=response.status, body=body.encode(), content_type=content_type)


class SlackWebhookHandler(WebhookHandler):
    """Verifies and dispatches one bot's Events API and slash command requests.

    Raises:
        ValueError: the bot has no signing secret.
    """

    def __init__(
        self,
        config: BotConfig,
        sink: InboundSink,
        *,
        settings: SlackSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(config, sink)
        self._settings = settings or SlackSettings.from_config(config)
        if not self._settings.signing_secret:
            raise ValueError(f"Slack bot {config.bot_name!r} has no signing secret")
        self._verifier = SignatureVerifier(self._settings.signing_secret)
        self._clock = clock
        self.receiver = SlackReceiver(config, self._settings, sink)

    async def initialize(self) -> None:
        """Learn the bot's identity now.

        If Slack cannot be reached, events get a 503 (and Slack retries) until it can.
        """
        try:
            await self.receiver.identity.get()
        except IdentityUnavailable as exc:
            log.warning("slack bot identity unknown at start: %s", exc)

    def _verify(self, headers: Mapping[str, str], body: bytes) -> None:
        timestamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not timestamp or not signature:
            raise WebhookVerificationError("missing Slack signature headers", 401)
        if _TIMESTAMP.fullmatch(timestamp) is None:
            raise WebhookVerificationError("malformed Slack request timestamp", 401)
        if abs(self._clock() - int(timestamp)) > SIGNATURE_WINDOW_SECONDS:
            raise WebhookVerificationError(
                "Slack request timestamp outside the 5-minute window", 401
            )
        try:
            expected = self._verifier.generate_signature(timestamp=timestamp, body=body)
        except UnicodeDecodeError:
            raise WebhookVerificationError("Slack request body is not UTF-8", 401) from None
        if expected is None or not hmac.compare_digest(expected.encode(), signature.encode()):
            raise WebhookVerificationError("Slack signature mismatch", 401)

    async def handle(self, headers: Mapping[str, str], body: bytes) -> WebhookResponse:
        """Verify, then let Bolt answer (after the message is stored).

        Raises:
            WebhookVerificationError: missing, stale or wrong signature; nothing stored.
        """
        self._verify(headers, body)
        try:
            text = body.decode("utf-8")
            parsed = parse_body(text, extract_content_type(build_normalized_headers(dict(headers))))
        except (ValueError, UnicodeDecodeError):
            return _json(400, {"error": "request body is neither JSON nor a form"})
        if not isinstance(parsed, dict):
            # Bolt would fail on it (a 500) before any listener runs.
            return _json(400, {"error": "request body is JSON but not an object"})
        request = AsyncBoltRequest(body=text, headers=dict(headers))
        if request.body.get("type") == "app_rate_limited":
            # Slack drops events past 30,000 an hour per workspace; it needs a 200 all the same.
            log.warning("slack is rate limiting this app's events", extra=_rate_limit(request))
            return WebhookResponse(status=200)
        if request.body.get("type") not in _NO_IDENTITY_NEEDED:
            try:
                await self.receiver.identity.get()
            except IdentityUnavailable as exc:
                log.warning("slack request refused for now: %s", exc)
                return WebhookResponse.unavailable("the bot's identity is not known yet; retry")
        return _to_webhook_response(await self.receiver.app.async_dispatch(request))
