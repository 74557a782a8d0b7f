"""Hubbub's exception tree. Errors carry the data callers act on.

::

    HubbubError
    ├── ConfigError                 misconfiguration an operator must fix
    ├── InvalidInput                bad input from a user or platform; nothing was stored
    │   ├── MessageTooLong(length, limit)
    │   └── UnknownConversation
    └── ProviderError(model)        a model call failed (``fix``: the setting to change, if any)
        ├── ContextOverflow         the prompt did not fit the provider's window
        ├── ProviderConfigError     a setting is wrong; retrying cannot help
        │   ├── ProviderAuthError   the provider refused the credentials
        │   │   └── MissingApiKey   no API key was set for a provider that needs one
        │   ├── ModelNotFound       the provider does not serve the model
        │   └── EndpointNotFound    the API base answers, but not as the provider's API
        ├── ProviderRateLimited     429 (retry_after when the provider said)
        ├── ProviderUnavailable     5xx, timeouts, connection failures
        │   └── ProviderUnreachable nothing answers at the configured API base
        └── ProviderBadRequest      any other 4xx

Compaction does not raise: how an attempt ended is data
(``agent_core.compaction.runner.CompactionReport``).

Every error keeps its constructor arguments in ``args`` so Celery can pickle it between
processes.
"""

from __future__ import annotations


class HubbubError(Exception):
    """Base of every error Hubbub raises on purpose."""


class ConfigError(HubbubError):
    """The configuration is missing or wrong; the message says what to set."""


class InvalidInput(HubbubError):
    """Input from a user or platform was refused; nothing was stored."""


class MessageTooLong(InvalidInput):
    """A message is longer than the configured maximum."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(length, limit)
        self.length = length
        self.limit = limit

    def __str__(self) -> str:
        return f"message is {self.length:,} characters long; the limit is {self.limit:,}"


class UnknownConversation(InvalidInput):
    """A conversation that does not exist was asked for."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self.conversation_id = conversation_id

    def __str__(self) -> str:
        return f"unknown conversation {self.conversation_id!r}"


class ProviderError(HubbubError):
    """A call to the model provider failed."""

    def __init__(
        self, model: str, message: str, status_code: int | None = None, *, fix: str = ""
    ) -> None:
        super().__init__(model, message, status_code)
        self.model = model
        """The litellm model string that was called."""
        self.message = message
        """The provider's message, shortened; never contains credentials."""
        self.status_code = status_code
        """The HTTP status, when there was one."""
        self.fix = fix
        """What the operator should change, e.g. "set HUBBUB_LLM_API_KEY"; empty when
        nothing in the configuration is at fault. Kept in ``__dict__``, so it survives
        pickling."""
        self.tried: tuple[str, ...] = (model,)
        """Every model the call went to, ``model`` first (its fallbacks failed too)."""

    def __str__(self) -> str:
        status = f" ({self.status_code})" if self.status_code else ""
        return f"{self.model}{status}: {self.message}"

    @property
    def retryable(self) -> bool:
        """Whether retrying the same request later may succeed."""
        return False


class ContextOverflow(ProviderError):
    """The request was larger than the model's context window."""


class ProviderConfigError(ProviderError):
    """The provider refused the call because of Hubbub's settings; ``fix`` names them."""


class ProviderAuthError(ProviderConfigError):
    """The provider rejected the API key or the account has no access."""


class MissingApiKey(ProviderAuthError):
    """No API key was configured, and the provider (or its client) needs one."""


class ModelNotFound(ProviderConfigError):
    """The provider does not know the configured model."""


class EndpointNotFound(ProviderConfigError):
    """Something answers at the API base, but has no such API there (a 404 not about a model)."""


class ProviderRateLimited(ProviderError):
    """The provider answered 429."""

    def __init__(
        self,
        model: str,
        message: str,
        status_code: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(model, message, status_code)
        self.args = (model, message, status_code, retry_after)
        self.retry_after = retry_after
        """Seconds the provider asked us to wait, if it said."""

    @property
    def retryable(self) -> bool:
        """Rate limits pass."""
        return True


class ProviderUnavailable(ProviderError):
    """The provider failed on its side or could not be reached (5xx, timeout, network)."""

    @property
    def retryable(self) -> bool:
        """Outages pass."""
        return True


class ProviderUnreachable(ProviderUnavailable):
    """Nothing answers at the configured API base (connection refused, unknown host).

    Retried like any outage (a local server may be restarting), but when it persists the
    likely cause is the setting, which ``fix`` names.
    """


class ProviderBadRequest(ProviderError):
    """The provider refused the request for a reason retrying will not fix."""
