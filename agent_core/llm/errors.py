"""Translate litellm's exceptions into Hubbub's: the only module that names them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import litellm
import litellm.exceptions as lx

from agent_core.errors import (
    ContextOverflow,
    EndpointNotFound,
    MissingApiKey,
    ModelNotFound,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
    ProviderUnreachable,
)
from agent_core.llm.model import CallStopped

MAX_MESSAGE_CHARS = 300

# Providers word overflow differently and litellm only recognises some of them.
_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long|"
    r"input is too long|request too large|reduce the length|exceeds? the (model'?s )?"
    r"(maximum|context)|payload too large|long context",
    re.IGNORECASE,
)
_KEY = re.compile(r"(sk|xox[abp]|xapp|key)[-_][A-Za-z0-9_\-]{6,}")
# The openai client refuses to start without a key even for a local server; litellm reports
# that as a 500, and a missing Anthropic (or other) key as a 401 worded like this.
_MISSING_KEY = re.compile(
    r"missing credentials|missing \w+ api key|api_key client option must be set|"
    r"no api key (was )?(provided|set|found)|api key (is )?(not set|missing)",
    re.IGNORECASE,
)
# Connection failures that litellm wraps as a 500 "Connection error." or similar.
_CONNECTION = re.compile(
    r"connection (error|refused)|errno 111|name or service not known|nodename nor servname|"
    r"no route to host|cannot connect to host|unsupported protocol|temporary failure in name",
    re.IGNORECASE,
)
_MODEL_UNKNOWN = re.compile(
    r"model_not_found|model .{0,80}(not found|does not exist|not exist|unknown)|"
    r"(unknown|invalid|unsupported) model|no such model|model is not supported",
    re.IGNORECASE,
)
# litellm repeats class names in front of the provider's words: "InternalServerError:
# InternalServerError: OpenAIException - Connection error."
_ERROR_PREFIX = re.compile(r"^(\s*(\w+(Error|Exception))\s*[:-]\s*)+")
_NO_PROVIDER = re.compile(r"LLM Provider NOT provided", re.IGNORECASE)


def _clean(message: str) -> str:
    message = _KEY.sub("[REDACTED]", " ".join(message.split()))
    message = _ERROR_PREFIX.sub("", message.removeprefix("litellm.")).strip()
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


def key_variables(model: str) -> list[str]:
    """The environment variables that carry an API key for ``model``'s provider."""
    try:
        provider = litellm.get_llm_provider(model)[1]
    except Exception:  # no provider in the model string: nothing to name
        return ["HUBBUB_LLM_API_KEY"]
    return ["HUBBUB_LLM_API_KEY", f"{provider.upper()}_API_KEY"]


def _key_fix(model: str, api_base: str | None, *, missing: bool) -> str:
    names = key_variables(model)
    variables = names[0] + (f" (or {names[1]})" if len(names) > 1 else "")
    if not missing:
        return f"set {variables} to a key the provider accepts"
    local = " (any string will do for a local server that checks none)" if api_base else ""
    return f"set {variables}{local}"


def _config_error(
    exc: BaseException, model: str, message: str, status: int | None, api_base: str | None
) -> ProviderError | None:
    """The configuration error ``exc`` stands for, or ``None`` for anything else."""
    if _MISSING_KEY.search(message):
        return MissingApiKey(model, message, status, fix=_key_fix(model, api_base, missing=True))
    if isinstance(exc, lx.AuthenticationError | lx.PermissionDeniedError) or status in (401, 403):
        return ProviderAuthError(
            model, message, status, fix=_key_fix(model, api_base, missing=False)
        )
    if _NO_PROVIDER.search(message):
        return ProviderConfigError(
            model,
            message,
            status,
            fix="set HUBBUB_MODEL to provider/model, e.g. openai/gpt-4o-mini or ollama/llama3.1",
        )
    not_found = isinstance(exc, lx.NotFoundError) or status == 404
    # Ollama words an unpulled model this way and litellm gives it whatever status it likes.
    if _MODEL_UNKNOWN.search(message):
        return ModelNotFound(
            model, message, status, fix="set HUBBUB_MODEL to a model the provider serves"
        )
    if not_found and api_base:
        return EndpointNotFound(
            model,
            message,
            status,
            fix=f"check HUBBUB_LLM_API_BASE={api_base} (OpenAI-compatible servers usually "
            "want the URL ending in /v1)",
        )
    if not_found:
        return ModelNotFound(
            model, message, status, fix="set HUBBUB_MODEL to a model the provider serves"
        )
    return None


def translate(exc: BaseException, model: str, *, api_base: str | None = None) -> ProviderError:
    """The most specific Hubbub error for a litellm (or openai / httpx) exception.

    Args:
        exc: what the call raised.
        model: the litellm model string that was called.
        api_base: the configured endpoint, if any: a connection failure there is named
            as such (the setting may be wrong), not as a provider outage.
    """
    message = _clean(str(getattr(exc, "message", None) or exc))
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if isinstance(exc, lx.ContextWindowExceededError):
        return ContextOverflow(model, message, status)
    if isinstance(exc, lx.RateLimitError):
        # litellm maps 413 "Request too large" to a RateLimitError; it is an overflow.
        if _OVERFLOW.search(message):
            return ContextOverflow(model, message, status)
        return ProviderRateLimited(model, message, status or 429, _retry_after(exc))
    if isinstance(exc, lx.Timeout):
        return ProviderUnavailable(model, message, status)
    if status == 413 or (status == 400 and _OVERFLOW.search(message)):
        return ContextOverflow(model, message, status)
    if isinstance(exc, lx.BadRequestError) and _OVERFLOW.search(message):
        return ContextOverflow(model, message, status)
    configuration = _config_error(exc, model, message, status, api_base)
    if configuration is not None:
        return configuration
    connection = isinstance(exc, lx.APIConnectionError | ConnectionError) or bool(
        _CONNECTION.search(message)
    )
    if connection and api_base:
        return ProviderUnreachable(
            model,
            message,
            status,
            fix=f"start the model server at {api_base} or correct HUBBUB_LLM_API_BASE",
        )
    if connection:
        return ProviderUnavailable(model, message, status)
    if status is not None and status >= 500:
        return ProviderUnavailable(model, message, status)
    if isinstance(
        exc,
        lx.InternalServerError | lx.ServiceUnavailableError | lx.BadGatewayError,
    ):
        return ProviderUnavailable(model, message, status)
    if status == 429:
        return ProviderRateLimited(model, message, status, _retry_after(exc))
    if isinstance(exc, TimeoutError | OSError):
        return ProviderUnavailable(model, message, status)
    return ProviderBadRequest(model, message, status)


@contextmanager
def map_litellm_errors(model: str, *, api_base: str | None = None) -> Iterator[None]:
    """Re-raise anything litellm raises as a :class:`ProviderError` (see :func:`translate`).

    A stop the caller's text sink raised (:class:`CallStopped`) is not litellm's: it passes.
    """
    try:
        yield
    except (ProviderError, CallStopped):
        raise
    except Exception as exc:
        raise translate(exc, model, api_base=api_base) from exc
