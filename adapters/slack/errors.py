"""What a failed Web API call proves: Slack refused it, never got it, or may have done it.

The only module of the deliverer that reads slack_sdk's and aiohttp's exceptions. A post
whose answer was lost (a timeout, a dropped connection, a 5xx, or ``internal_error`` /
``fatal_error``, of which Slack says "it's possible some aspect of the operation succeeded
before the error was raised") may be in the channel; the deliverer settles that from the
channel's history before it posts again. A refused connection, a 429 and the other
``ok: false`` answers prove nothing was posted.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.slack.identity import IdentityUnavailable

MAYBE_DONE_ERRORS = frozenset({"internal_error", "fatal_error"})
"""``ok: false`` answers after which Slack may have done the work anyway."""
RETRY_LATER_ERRORS = frozenset({"ratelimited", "service_unavailable", "request_timeout"})
"""``ok: false`` answers that say nothing was done and a later call may work."""
CALL_FAILURES: tuple[type[BaseException], ...] = (
    SlackClientError,
    IdentityUnavailable,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
)
"""What a Web API call may raise, all read by :func:`call_failure`."""


@dataclass(frozen=True, slots=True)
class CallFailure:
    """What a failed call proves."""

    reason: str
    retryable: bool
    """Whether the same call may work later."""
    maybe_done: bool
    """Whether Slack may have done it (posted the message) although the call failed."""


def error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` (``channel_not_found``), or ``http_<status>`` when it gave none."""
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    return str(data.get("error") or f"http_{exc.response.status_code}")


def call_failure(exc: BaseException, method: str) -> CallFailure:
    """What ``exc``, raised by a call of ``method``, proves."""
    if isinstance(exc, SlackApiError):
        code = error_code(exc)
        if code in MAYBE_DONE_ERRORS or exc.response.status_code >= 500:
            return CallFailure(f"Slack answered {method} with {code}", True, maybe_done=True)
        retryable = code in RETRY_LATER_ERRORS or exc.response.status_code == 429
        return CallFailure(f"Slack refused {method}: {code}", retryable, maybe_done=False)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return CallFailure(f"Slack unreachable: {exc}", True, maybe_done=False)
    if isinstance(exc, IdentityUnavailable):
        return CallFailure(str(exc), True, maybe_done=False)
    return CallFailure(
        f"no answer from Slack to {method} ({type(exc).__name__})", True, maybe_done=True
    )
