"""The :class:`ChatModel` that reaches any provider through litellm's ``Router``.

A model and its fallbacks are one Router, built once per chain: a 429, a 5xx or a timeout
moves the call to the next model at once (no retry, no sleep on ``Retry-After``); only the
last model of the chain is retried, by the Router, ``max_retries`` times with back-off. The
openai client's own hidden retries are off (``max_retries=0`` per deployment).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import litellm
from litellm.router import RetryPolicy, Router

from agent_core.config import DEFAULT_CONTEXT_LENGTH, LLMSettings
from agent_core.errors import ConfigError, ProviderError
from agent_core.llm.costs import catalogue_price, remember_catalogue_prices
from agent_core.llm.errors import map_litellm_errors
from agent_core.llm.model import CallStopped, ChatResult, Message, TextSink, Usage
from agent_core.llm.prompt_caching import apply_anthropic_cache_control, is_anthropic_model

log = logging.getLogger(__name__)

PROBE_MESSAGES: list[Message] = [{"role": "user", "content": "Reply with OK."}]
"""What :meth:`LiteLLMModel.probe` sends: the smallest ordinary chat request."""

litellm.suppress_debug_info = True
litellm.telemetry = False
# Hubbub registers no litellm callbacks, and litellm would run its success logging on a
# thread for every streamed chunk (half the CPU of a streamed reply, measured).
litellm.disable_streaming_logging = True

UNPRICED = dict.fromkeys(
    (
        "input_cost_per_token",
        "output_cost_per_token",
        "cache_read_input_token_cost",
        "cache_creation_input_token_cost",
    ),
    0.0,
)
"""The price a Router deployment declares for a model litellm's map does not price.

litellm prices every answer itself, twice per call, and an answer that costs 0 on a map
entry without explicit rates sends it searching the entry for one (about 2 ms of CPU per
call, measured). Explicit zeros end that search; Hubbub's own prices
(:mod:`agent_core.llm.costs`) were read before and are unchanged.
"""

NO_RETRIES = RetryPolicy(**dict.fromkeys(RetryPolicy.model_fields, 0))
"""The policy of a model with a fallback: its failures hand over at once."""


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
    """A model, and the models it falls back to, reached through one litellm Router.

    Args:
        settings: the model string, its fallbacks and endpoints, credentials, retries.

    Raises:
        ConfigError: no model is configured.
    """

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.model:
            raise ConfigError("no model configured: set HUBBUB_MODEL (any litellm model string)")
        self._settings = settings
        self._model = settings.model
        self.chain: tuple[str, ...] = tuple(dict.fromkeys((settings.model, *settings.fallbacks)))
        """The model, then its fallbacks, in the order the Router tries them."""
        self._endpoints = dict(settings.endpoints)
        # The Router writes its models into litellm's map: read the catalogue's word first.
        remember_catalogue_prices(self.chain)
        for model in self.chain:
            _model_info(model)
        self._router = self._build_router()

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

    def api_base(self, model: str) -> str | None:
        """Where ``model`` is served: its own endpoint, else the shared one."""
        return self._endpoints.get(model) or self._settings.api_base

    def _deployment(self, model: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": model,
            "timeout": self._settings.timeout,
            "max_retries": 0,
        }
        if api_base := self.api_base(model):
            params["api_base"] = api_base
        if self._settings.api_key:
            params["api_key"] = self._settings.api_key
        info: dict[str, Any] = {"id": model}
        if catalogue_price(model) is None:
            info |= UNPRICED
        return {"model_name": model, "litellm_params": params, "model_info": info}

    def _build_router(self) -> Router:
        chain = self.chain
        router: Router = Router(
            model_list=[self._deployment(model) for model in chain],
            fallbacks=[{chain[0]: list(chain[1:])}] if len(chain) > 1 else [],
            max_fallbacks=len(chain),
            num_retries=self._settings.max_retries,
            model_group_retry_policy=dict.fromkeys(chain[:-1], NO_RETRIES),
            # A lone model cooled down would refuse every call for a while; each turn asks.
            disable_cooldowns=True,
        )
        return router

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        payload: list[dict[str, Any]] = [dict(m) for m in messages]
        if is_anthropic_model(self._model):
            payload = apply_anthropic_cache_control(payload, self._settings.prompt_cache_ttl)
        kwargs: dict[str, Any] = {"model": self._model, "messages": payload}
        if tools:
            kwargs["tools"] = list(tools)
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        return kwargs

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> ChatResult:
        """Call the chain; streamed when ``on_text`` is given.

        A stream that fails before its first chunk moves to the next model like a plain
        call; one that fails midway is not resumed.

        Raises:
            ProviderError: the most specific subclass for the first model's failure (its
                message says how the fallbacks failed), with ``tried`` naming the chain.
        """
        kwargs = self._request(messages, tools, max_tokens)
        started = time.perf_counter()
        try:
            with map_litellm_errors(self._model, api_base=self.api_base(self._model)):
                if on_text is None:
                    response = self._router.completion(**kwargs)
                    hidden = getattr(response, "_hidden_params", None) or {}
                else:
                    response, hidden = _streamed(self._router, self._model, kwargs, on_text)
        except ProviderError as error:
            error.tried = self.chain
            raise
        answered = str(hidden.get("model_id") or self._model)
        if answered != self._model:
            log.warning("llm call fell back", extra={"model": self._model, "answered": answered})
        headers = hidden.get("additional_headers") or {}
        attempts = 1 + sum(
            int(headers.get(key) or 0)
            for key in ("x-litellm-attempted-retries", "x-litellm-attempted-fallbacks")
        )
        return _to_result(response, answered, time.perf_counter() - started, attempts)

    def probe(self, timeout: float) -> ProviderError | None:
        """Ask the main model for one token, once, within ``timeout``; the error, or ``None``.

        ``hubbub doctor`` uses it to prove the key, the model name and the endpoint
        together, the way a turn would use them (no fallback stands in for it).
        """
        kwargs = (
            self._request(PROBE_MESSAGES, None, 1)
            | self._deployment(self._model)["litellm_params"]
            | {"timeout": timeout}
        )
        try:
            with map_litellm_errors(self._model, api_base=self.api_base(self._model)):
                litellm.completion(**kwargs)
        except ProviderError as error:
            return error
        return None


def _streamed(
    router: Router, model: str, kwargs: dict[str, Any], on_text: TextSink
) -> tuple[Any, dict[str, Any]]:
    """One streamed call, rebuilt into the response a plain call returns (usage included).

    Returned with the stream's hidden parameters, which name the model that answered.
    ``on_text`` sees the text so far after each content delta, until a tool call starts.

    Raises:
        ProviderError: the stream ended before any chunk arrived.
        CallStopped: ``on_text`` said to stop; the stream is closed.
    """
    chunks: list[Any] = []
    text = ""
    showing = True
    stream: Any = router.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    try:
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
    except CallStopped:
        # Closed now, not when the stream is collected: the provider stops generating.
        stream.close()
        raise
    response = litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
    if response is None:
        raise ProviderError(model, "the provider's stream ended without an answer")
    return response, dict(getattr(stream, "_hidden_params", None) or {})


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
