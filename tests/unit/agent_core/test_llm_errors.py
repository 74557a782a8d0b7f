from __future__ import annotations

import httpx
import pytest
from litellm import exceptions as lx

from agent_core.errors import (
    ContextOverflow,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderRateLimited,
    ProviderUnavailable,
)
from agent_core.llm.errors import map_litellm_errors, translate

MODEL = "openai/fake"


def _response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=httpx.Request("POST", "http://x"))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            lx.ContextWindowExceededError(message="too long", model=MODEL, llm_provider="openai"),
            ContextOverflow,
        ),
        (
            lx.RateLimitError(message="Request too large", model=MODEL, llm_provider="openai"),
            ContextOverflow,
        ),
        (
            lx.RateLimitError(message="slow down", model=MODEL, llm_provider="openai"),
            ProviderRateLimited,
        ),
        (
            lx.AuthenticationError(message="bad key", model=MODEL, llm_provider="openai"),
            ProviderAuthError,
        ),
        (
            lx.InternalServerError(message="boom", model=MODEL, llm_provider="openai"),
            ProviderUnavailable,
        ),
        (
            lx.APIConnectionError(message="refused", model=MODEL, llm_provider="openai"),
            ProviderUnavailable,
        ),
        (
            lx.BadRequestError(
                message="Input is too long for requested model", model=MODEL, llm_provider="openai"
            ),
            ContextOverflow,
        ),
        (
            lx.BadRequestError(message="bad tool schema", model=MODEL, llm_provider="openai"),
            ProviderBadRequest,
        ),
    ],
)
def test_translate_picks_the_specific_error(exc: Exception, expected: type) -> None:
    assert type(translate(exc, MODEL)) is expected


def test_rate_limit_keeps_retry_after() -> None:
    exc = lx.RateLimitError(
        message="slow",
        model=MODEL,
        llm_provider="openai",
        response=_response(429, {"retry-after": "7"}),
    )
    error = translate(exc, MODEL)
    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after == 7.0


def test_keys_never_reach_the_message() -> None:
    exc = lx.AuthenticationError(
        message="Incorrect API key provided: sk-abcdef1234567890",
        model=MODEL,
        llm_provider="openai",
    )
    assert "sk-abcdef" not in str(translate(exc, MODEL))


def test_context_manager_chains_the_original() -> None:
    with pytest.raises(ProviderUnavailable) as info, map_litellm_errors(MODEL):
        raise lx.InternalServerError(message="x", model=MODEL, llm_provider="openai")
    assert isinstance(info.value.__cause__, lx.InternalServerError)


def test_errors_survive_pickling() -> None:
    import pickle

    error = ProviderRateLimited(MODEL, "slow", 429, 3.0)
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.model, clone.retry_after, clone.status_code) == (MODEL, 3.0, 429)
