"""The :class:`ChatModel` that reaches any provider through litellm.

Hubbub owns the retry policy: litellm's and the openai client's hidden retries are off
(``max_retries=0``) and 429 / 5xx / timeouts are retried here with exponential back-off and
jitter, honouring the provider's ``Retry-After``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import litellm

from agent_core.config import DEFAULT_CONTEXT_LENGTH, LLMSettings
from agent_core.errors import ConfigError, ProviderError, ProviderRateLimited
from agent_core.llm.errors import map_litellm_errors
from agent_core.llm.model import ChatResult, Message, TextSink, Usage
from agent_core.llm.prompt_caching import apply_anthropic_cache_control, is_anthropic_model

log = logging.getLogger(__name__)

PROBE_MESSAGES: list[Message] = [{"role": "user", "content": "Reply with OK."}]
"""What :meth:`LiteLLMModel.probe` sends: the smallest ordinary chat request."""

litellm.suppress_debug_info = True
litellm.telemetry = False


@lru_cache(maxsize=64)
def _model_info(model: str) -> dict[str, Any]:
    try:
        return dict(litellm.get_model_info(model))
    except Exception:  # litellm raises several types for unknown models
        return {}


def known_context_length(model: str) -> int | None:
    """The input window litellm knows for ``model``, or ``None``."""
    info = _model_info(model)
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


def known_max_output_tokens(model: str) -> int | None:
    """The output limit litellm knows for ``model``, or ``None``."""
    value = _model_info(model).get("max_output_tokens")
    return int(value) if value else None


def missing_credentials(model: str) -> list[str]:
    """Environment variables the provider of ``model`` needs that are not set.

    Besides keys these may be endpoints (``OLLAMA_API_BASE``, which has a default).
    """
    try:
        report = litellm.validate_environment(model=model)
    except Exception:  # unknown providers: nothing we can check
        return []
    return list(report.get("missing_keys") or [])


class LiteLLMModel:
    """A model reached through litellm.

    Args:
        settings: the model string, endpoint, credentials and retry policy.
        sleep: how to wait between retries (tests pass a recorder).

    Raises:
        ConfigError: no model is configured.
    """

    def __init__(
        self, settings: LLMSettings, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        if not settings.model:
            raise ConfigError("no model configured: set HUBBUB_MODEL (any litellm model string)")
        self._settings = settings
        self._model = settings.model
        self._sleep = sleep

    @property
    def name(self) -> str:
        """The litellm model string."""
        return self._model

    @property
    def context_length(self) -> int:
        """Configured override, else litellm's catalogue, else a conservative default."""
        return (
            self._settings.context_length
            or known_context_length(self._model)
            or DEFAULT_CONTEXT_LENGTH
        )

    @property
    def max_output_tokens(self) -> int | None:
        """Configured output reservation, else litellm's catalogue."""
        return self._settings.max_output_tokens or known_max_output_tokens(self._model)

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        payload: list[dict[str, Any]] = [dict(m) for m in messages]
        if is_anthropic_model(self._model):
            payload = apply_anthropic_cache_control(payload, self._settings.prompt_cache_ttl)
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": payload,
            "timeout": self._settings.timeout,
            "max_retries": 0,
        }
        if self._settings.api_base:
            kwargs["api_base"] = self._settings.api_base
        if self._settings.api_key:
            kwargs["api_key"] = self._settings.api_key
        if tools:
            kwargs["tools"] = list(tools)
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        return kwargs

    def _backoff(self, attempt: int, error: ProviderError) -> float:
        if isinstance(error, ProviderRateLimited) and error.retry_after is not None:
            return min(error.retry_after, self._settings.retry_max_seconds)
        base = self._settings.retry_base_seconds * (2 ** (attempt - 1))
        return float(min(base, self._settings.retry_max_seconds) * random.uniform(0.5, 1.0))

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """Call the model, retrying transient failures; streamed when ``on_text`` is given.

        A retried stream starts again: ``on_text`` then sees the text restart.

        Raises:
            ProviderError: the most specific subclass, after retries are spent.
        """
        kwargs = self._request(messages, tools, max_tokens)
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                with map_litellm_errors(self._model, api_base=self._settings.api_base):
                    if on_text is None:
                        response = litellm.completion(**kwargs)
                    else:
                        response = _streamed(self._model, kwargs, on_text)
                break
            except ProviderError as error:
                if not error.retryable or attempt > self._settings.max_retries:
                    raise
                delay = self._backoff(attempt, error)
                log.warning(
                    "llm call failed, retrying",
                    extra={
                        "model": self._model,
                        "error": type(error).__name__,
                        "status": error.status_code,
                        "attempt": attempt,
                        "delay_seconds": round(delay, 2),
                    },
                )
                self._sleep(delay)
        return _to_result(response, self._model, time.perf_counter() - started, attempt)

    def probe(self, timeout: float) -> ProviderError | None:
        """Ask for one token, once, within ``timeout`` seconds; the error, or ``None``.

        ``hubbub doctor`` uses it to prove the key, the model name and the endpoint
        together, the way a turn would use them.
        """
        kwargs = self._request(PROBE_MESSAGES, None, 1) | {"timeout": timeout}
        try:
            with map_litellm_errors(self._model, api_base=self._settings.api_base):
                litellm.completion(**kwargs)
        except ProviderError as error:
            return error
        return None


def _streamed(model: str, kwargs: dict[str, Any], on_text: TextSink) -> Any:
    """One streamed call, rebuilt into the response a plain call returns (usage included).

    ``on_text`` sees the text so far after each content delta, until a tool call starts.

    Raises:
        ProviderError: the stream ended before any chunk arrived.
    """
    chunks: list[Any] = []
    text = ""
    showing = True
    stream = litellm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        chunks.append(chunk)
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if getattr(delta, "tool_calls", None):
            showing = False
        piece = getattr(delta, "content", None)
        if piece and showing:
            text += piece
            on_text(text)
    response = litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
    if response is None:
        raise ProviderError(model, "the provider's stream ended without an answer")
    return response


def _to_result(response: Any, model: str, latency: float, attempts: int) -> ChatResult:
    choice = response.choices[0]
    message = choice.message
    tool_calls = None
    if getattr(message, "tool_calls", None):
        tool_calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    usage = None
    raw = getattr(response, "usage", None)
    if raw is not None and getattr(raw, "prompt_tokens", None) is not None:
        details = getattr(raw, "prompt_tokens_details", None)
        usage = Usage(
            prompt_tokens=int(raw.prompt_tokens or 0),
            completion_tokens=int(raw.completion_tokens or 0),
            total_tokens=int(raw.total_tokens or 0),
            cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        )
    return ChatResult(
        content=message.content,
        tool_calls=tool_calls,
        usage=usage,
        model=model,
        finish_reason=choice.finish_reason,
        latency_seconds=latency,
        attempts=attempts,
    )
