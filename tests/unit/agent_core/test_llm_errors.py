from __future__ import annotations

import httpx
import pytest
from litellm import exceptions as lx

from agent_core.errors import (
    ContextOverflow,
    EndpointNotFound,
    MissingApiKey,
    ModelNotFound,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConfigError,
    ProviderRateLimited,
    ProviderUnavailable,
    ProviderUnreachable,
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


BASE = "http://127.0.0.1:8000/v1"
_MISSING_OPENAI_KEY = (
    "OpenAIException - Missing credentials. Please pass an `api_key`, `workload_identity`, "
    "`admin_api_key`, or set the `OPENAI_API_KEY` or `OPENAI_ADMIN_KEY` environment variable."
)


class TestConfigurationErrors:
    """What litellm raises for a wrong setting (shapes seen against a local server)."""

    @pytest.mark.parametrize(
        ("exc", "api_base", "expected", "fix"),
        [
            (
                lx.InternalServerError(
                    message=_MISSING_OPENAI_KEY, model=MODEL, llm_provider="openai"
                ),
                BASE,
                MissingApiKey,
                "set HUBBUB_LLM_API_KEY (or OPENAI_API_KEY) (any string will do",
            ),
            (
                lx.AuthenticationError(
                    message="Missing Anthropic API Key - A call is being made to anthropic",
                    model="anthropic/claude-3-5-sonnet-20241022",
                    llm_provider="anthropic",
                ),
                None,
                MissingApiKey,
                "set HUBBUB_LLM_API_KEY (or ANTHROPIC_API_KEY)",
            ),
            (
                lx.AuthenticationError(
                    message="Incorrect API key provided.", model=MODEL, llm_provider="openai"
                ),
                BASE,
                ProviderAuthError,
                "to a key the provider accepts",
            ),
            (
                lx.NotFoundError(
                    message="The model `fake` does not exist or you do not have access to it.",
                    model=MODEL,
                    llm_provider="openai",
                ),
                BASE,
                ModelNotFound,
                "set HUBBUB_MODEL",
            ),
            (
                lx.BadRequestError(
                    message="model 'llama9' not found, try pulling it first",
                    model=MODEL,
                    llm_provider="openai",
                ),
                BASE,
                ModelNotFound,
                "set HUBBUB_MODEL",
            ),
            (
                lx.NotFoundError(message="Not Found", model=MODEL, llm_provider="openai"),
                BASE,
                EndpointNotFound,
                f"check HUBBUB_LLM_API_BASE={BASE}",
            ),
            (
                lx.InternalServerError(
                    message="OpenAIException - Connection error.",
                    model=MODEL,
                    llm_provider="openai",
                ),
                BASE,
                ProviderUnreachable,
                f"start the model server at {BASE} or correct HUBBUB_LLM_API_BASE",
            ),
            (
                lx.BadRequestError(
                    message="LLM Provider NOT provided. Pass in the LLM provider you are trying "
                    "to call. You passed model=fake-model",
                    model="fake-model",
                    llm_provider="",
                ),
                None,
                ProviderConfigError,
                "set HUBBUB_MODEL to provider/model",
            ),
        ],
    )
    def test_named_with_the_setting_to_fix(
        self, exc: Exception, api_base: str | None, expected: type, fix: str
    ) -> None:
        error = translate(exc, getattr(exc, "model", MODEL) or MODEL, api_base=api_base)
        assert type(error) is expected
        assert fix in error.fix
        assert not error.retryable or isinstance(error, ProviderUnreachable)

    def test_connection_error_without_a_custom_base_is_an_outage(self) -> None:
        exc = lx.InternalServerError(
            message="OpenAIException - Connection error.", model=MODEL, llm_provider="openai"
        )
        error = translate(exc, MODEL)
        assert type(error) is ProviderUnavailable
        assert error.fix == ""

    def test_server_errors_stay_transient(self) -> None:
        exc = lx.InternalServerError(message="boom", model=MODEL, llm_provider="openai")
        error = translate(exc, MODEL, api_base=BASE)
        assert type(error) is ProviderUnavailable
        assert error.retryable

    def test_fix_survives_pickling(self) -> None:
        import pickle

        error = MissingApiKey(MODEL, "no key", 500, fix="set HUBBUB_LLM_API_KEY")
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is MissingApiKey
        assert clone.fix == "set HUBBUB_LLM_API_KEY"
