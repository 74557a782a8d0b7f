"""Translate litellm's exceptions into Hubbub's: the only module that names them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import litellm.exceptions as lx

from agent_core.errors import (
    ContextOverflow,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)

MAX_MESSAGE_CHARS = 300

# Providers word overflow differently and litellm only recognises some of them.
_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long|"
    r"input is too long|request too large|reduce the length|exceeds? the (model'?s )?"
    r"(maximum|context)|payload too large|long context",
    re.IGNORECASE,
)
_KEY = re.compile(r"(sk|xox[abp]|xapp|key)[-_][A-Za-z0-9_\-]{6,}")


def _clean(message: str) -> str:
    message = _KEY.sub("[REDACTED]", " ".join(message.split()))
    message = message.removeprefix("litellm.").strip()
    return message[:MAX_MESSAGE_CHARS]


def _retry_after(exc: BaseException) -> float | None:
    headers: Any = getattr(exc, "headers", None)
    response = getattr(exc, "response", None)
    if not headers and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def translate(exc: BaseException, model: str) -> ProviderError:
    """The most specific Hubbub error for a litellm (or openai / httpx) exception."""
    message = _clean(str(getattr(exc, "message", None) or exc))
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if isinstance(exc, lx.ContextWindowExceededError):
        return ContextOverflow(model, message, status)
    if isinstance(exc, lx.AuthenticationError | lx.PermissionDeniedError):
        return ProviderAuthError(model, message, status)
    if isinstance(exc, lx.RateLimitError):
        # litellm maps 413 "Request too large" to a RateLimitError; it is an overflow.
        if _OVERFLOW.search(message):
            return ContextOverflow(model, message, status)
        return ProviderRateLimited(model, message, status or 429, _retry_after(exc))
    if isinstance(exc, lx.Timeout | lx.APIConnectionError):
        return ProviderUnavailable(model, message, status)
    if status == 413 or (status == 400 and _OVERFLOW.search(message)):
        return ContextOverflow(model, message, status)
    if isinstance(exc, lx.BadRequestError) and _OVERFLOW.search(message):
        return ContextOverflow(model, message, status)
    if status is not None and status >= 500:
        return ProviderUnavailable(model, message, status)
    if isinstance(
        exc,
        lx.InternalServerError | lx.ServiceUnavailableError | lx.BadGatewayError,
    ):
        return ProviderUnavailable(model, message, status)
    if status == 429:
        return ProviderRateLimited(model, message, status, _retry_after(exc))
    if isinstance(exc, ConnectionError | TimeoutError | OSError):
        return ProviderUnavailable(model, message, status)
    return ProviderBadRequest(model, message, status)


@contextmanager
def map_litellm_errors(model: str) -> Iterator[None]:
    """Re-raise anything litellm raises as a :class:`ProviderError`."""
    try:
        yield
    except ProviderError:
        raise
    except Exception as exc:
        raise translate(exc, model) from exc
