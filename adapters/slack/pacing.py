"""Pace a bot's Slack Web API calls with its shared scheduler (:mod:`adapters.pacing`).

Slack allows about one message a second per channel (``chat.postMessage``; edits with
``chat.update`` post to the same channel) and limits each method per workspace by its
tier (``chat.update`` and the history methods are Tier 3, about 50 a minute). Every call
waits for a slot in its method's bucket and, for a message call, its channel's. A slot too
far away fails the call as Slack's own 429 would (a :class:`SlackApiError` with
``Retry-After``), before it is sent; a 429 Slack answers holds the method and the channel
back for every worker.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.pacing import BotPacer, PaceExceeded

MESSAGE_METHODS = frozenset(
    {"chat.postMessage", "chat.update", "chat.delete", "chat.postEphemeral", "chat.startStream"}
)
"""Calls that count against the channel's message rate."""


def _channel(*sources: Any) -> str | None:
    for source in sources:
        if isinstance(source, dict):
            found = source.get("channel") or source.get("channel_id")
            if isinstance(found, str) and found:
                return found
    return None


class PacedWebClient(AsyncWebClient):
    """slack_sdk's client, asking the bot's pacer before each call."""

    def __init__(self, pacer: BotPacer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pacer = pacer

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        """Make the call once its slot comes.

        Raises:
            SlackApiError: 429 when no slot is free within the bot's maximum wait (nothing
                was sent), or whatever Slack answered.
        """
        channel = _channel(kwargs.get("json"), kwargs.get("data"), kwargs.get("params"))
        message_call = api_method in MESSAGE_METHODS and channel is not None
        buckets = [self._pacer.bucket(api_method)]
        if message_call:
            buckets.append(self._pacer.bucket("channel", channel))
        try:
            await self._pacer.acquire(buckets)
        except PaceExceeded as exc:
            raise self._rate_limited(api_method, exc.wait) from exc
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            if exc.response.status_code == 429:
                keys = [self._pacer.key(api_method)]
                if message_call:
                    keys.append(self._pacer.key("channel", channel))
                await self._pacer.rate_limited(keys, _retry_after(exc))
            raise

    def _rate_limited(self, api_method: str, wait: float) -> SlackApiError:
        response = AsyncSlackResponse(
            client=self,
            http_verb="POST",
            api_url=f"{self.base_url}{api_method}",
            req_args={},
            data={"ok": False, "error": "ratelimited"},
            headers={"Retry-After": f"{wait:.3f}"},
            status_code=429,
        )
        reason = f"paced: no slot for {api_method} within the maximum wait"
        return SlackApiError(reason, response)  # type: ignore[no-untyped-call]


def _retry_after(exc: SlackApiError) -> float:
    headers = exc.response.headers or {}
    try:
        return max(0.0, float(headers.get("Retry-After", 1)))
    except ValueError:
        return 1.0
