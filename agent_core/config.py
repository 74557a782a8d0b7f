"""The one typed settings object: environment (``HUBBUB_*``), an optional YAML file, defaults.

Every default lives here as a named constant. Entry points (the CLI, the Celery app) build
one :class:`Settings` and pass it, or the slice a component needs, down; library code never
reads the environment itself.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import limits
import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

DEFAULT_HOME = Path(".hubbub")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_MAX_MESSAGE_CHARS = 32_000
DEFAULT_MAX_BODY_BYTES = 1_048_576
"""1 MiB: a web chat message at the character limit is at most ~400 KB of JSON (every
character escaped), and Telegram updates and Slack events are a few KB."""
DEFAULT_LLM_TIMEOUT_SECONDS = 120.0
DEFAULT_LLM_MAX_RETRIES = 3
DEFAULT_WORKER_CONCURRENCY = 8
DEFAULT_TURN_LEASE_SECONDS = 8.0
"""Short, so a killed worker's session is taken over within about lease + sweep interval;
the lease is renewed every quarter of it while the turn runs, however long the model takes."""
DEFAULT_SWEEP_INTERVAL_SECONDS = 2.0
DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 3600
DEFAULT_DELIVERY_MAX_ATTEMPTS = 8
DEFAULT_WORKER_METRICS_PORT = 9108
DEFAULT_SHUTDOWN_GRACE_SECONDS = 30.0
DEFAULT_CONTEXT_LENGTH = 128_000
DEFAULT_PERSONA = (
    "You are Hubbub, a helpful assistant taking part in chats on behalf of the people who run "
    "this bot. Be accurate, concise and friendly."
)

DEFAULT_COMPRESSION_RATIO = 0.50
DEFAULT_HYGIENE_RATIO = 0.85
DEFAULT_HARD_MESSAGE_LIMIT = 5_000
DEFAULT_TARGET_RATIO = 0.20
DEFAULT_PROTECT_FIRST_N = 3
DEFAULT_PROTECT_LAST_N = 20
DEFAULT_COMPACTION_LEASE_SECONDS = 300.0
DEFAULT_CONTEXT_ENGINE = "compressor"
DEFAULT_COMPACTION_IDLE_SECONDS = 300.0
DEFAULT_SUMMARY_CONCURRENCY = 4
"""Summary requests of one compaction in flight at once (chunk summaries, merge rounds)."""

DEFAULT_AGENT_MAX_ITERATIONS = 8
"""Model calls one turn may make (tool rounds plus the answer)."""
DEFAULT_BUDGET_RESERVATION_SECONDS = 900.0
"""How long a model call's reserved estimate counts against budgets if its worker dies."""
DEFAULT_RATE_LIMIT_USER = "10/minute;100/hour"
"""Turns one person may ask of one bot (``limits`` notation; several windows with ``;``)."""
DEFAULT_RATE_LIMIT_CHAT = "30/minute;300/hour"
"""Turns one chat may ask of one bot, whoever asks."""
DEFAULT_TOOL_LISTING_BUDGET = 0.05
"""Deferrable tool schemas beyond this share of the window go behind the bridge tools."""
DEFAULT_TOOL_MAX_CHARS = 50_000
DEFAULT_TOOL_MAX_LINES = 2_000
DEFAULT_TOOL_MAX_LINE_LENGTH = 2_000
DEFAULT_TOOL_RESULT_BUDGET = 0.15
"""A single tool result over this share of the window is stored and referenced."""
DEFAULT_TOOL_TURN_BUDGET = 0.30
"""All tool results of one model response over this share spill, largest first."""
DEFAULT_MCP_CALL_TIMEOUT_SECONDS = 60.0
DEFAULT_MCP_START_TIMEOUT_SECONDS = 30.0
DEFAULT_MEMORY_MAX_ENTRY_CHARS = 500
DEFAULT_MEMORY_MAX_ENTRIES = 50
"""Per scope: one person's facts with a bot, or one chat's."""

# -- hosted control plane --
DEFAULT_SETTINGS_REFRESH_SECONDS = 5.0
"""How long a process uses a bot's and its tenant's settings before reading them again."""

CONFIG_FILE_ENV = "HUBBUB_CONFIG"
POSTGRES_SHORT_SCHEME = "postgres://"
"""What many Postgres hosts hand out; read as ``postgresql://`` (psycopg 3)."""

TriggerMode = Literal["mention", "all", "commands"]
BusyModeName = Literal["queue", "collect", "interrupt", "steer"]
CacheTTL = Literal["5m", "1h"]
TelegramMode = Literal["auto", "webhook", "polling"]
WebchatMode = Literal["off", "local", "public"]

DEFAULT_WEBCHAT_MODE: WebchatMode = "local"
"""Loopback only: safe on a laptop, invisible behind any public listener."""
DEFAULT_INTERNAL_HOST = "127.0.0.1"
DEFAULT_WEBCHAT_COOKIE_DAYS = 365
"""How long a public web chat browser keeps its conversations."""
DEFAULT_CONSOLE_SESSION_HOURS = 8
"""A working day: a console sign-in lasts this long, then the key is asked again."""
# Busy modes (agent_core.busy).
DEFAULT_BUSY_MODE: BusyModeName = "collect"
"""Group chats arrive in bursts ("hey", "the deploy failed", "on staging"): one answer to
the burst, not one per line (OpenClaw's default queue mode is ``collect`` too)."""
DEFAULT_COLLECT_WINDOW_SECONDS = 2.0
"""How long ``collect`` waits after a message for the rest of its burst."""
# Streamed replies (issue 13 §1).
DEFAULT_STREAMING = True
DEFAULT_STREAM_EDIT_INTERVAL_SECONDS = 1.5
"""Telegram: at most one draft call per streamed reply this often (1 message/s per chat)."""
DEFAULT_STREAM_EDIT_INTERVAL_DISCORD_SECONDS = 1.0
"""Discord's message-edit bucket allows 5 per 5 s per channel: one a second stays inside."""
DEFAULT_STREAM_EDIT_INTERVAL_SLACK_SECONDS = 1.0
"""Slack posts at most about 1 message/s per channel; ``chat.update`` counts the same."""
DEFAULT_STREAM_EDIT_INTERVAL_WEBCHAT_SECONDS = 0.25
"""Web chat drafts cost no platform call, only a feed event and a re-render of the page."""

# Fleet-wide platform rate limits (issue 13 §5): ``limits`` notation, ``off`` for none.
DEFAULT_PLATFORM_LIMITS: dict[str, dict[str, str]] = {
    "telegram": {"bot": "30/second", "chat": "1/second", "group": "20/minute"},
    "discord": {"bot": "50/second", "route": "5/5 seconds"},
    "slack": {
        "channel": "1/second",
        "chat.update": "50/minute",
        "chat.delete": "50/minute",
        "conversations.history": "50/minute",
        "conversations.replies": "50/minute",
    },
}
"""Per bot (Telegram ``bot``, Discord's global ``bot``), per chat (``chat``, Slack's
``channel``), per group chat (``group``), per route and channel (Discord's ``route``, for
routes whose bucket it has not named yet), per Slack method by its tier."""
DEFAULT_PLATFORM_MAX_WAIT_SECONDS = 10.0
"""Longest a platform call waits for its slot; past it the call fails as retryable, unsent
(a delivery retries later). Short enough that a reply's chunks stay within its send time."""
DRAFT_MAX_WAIT_SECONDS = 1.0
"""Streamed drafts wait less: a draft that must wait longer is skipped until the next
interval (its text goes out with a later edit)."""
DRAFT_SHARE_OF_LIMITS = 0.5
"""Streamed drafts go only while a limit has more than half its calls left: the rest stays
for final replies (twenty replies streaming at once on one Slack workspace would otherwise
spend ``chat.update``'s 50 a minute on drafts and hold the finals back)."""

# Images (issue 13 §4) ---------------------------------------------------------------------
DEFAULT_IMAGE_MAX_BYTES = 5 * 1024 * 1024
"""Larger images are not fetched whole (providers refuse bigger ones: OpenAI 20 MB,
Anthropic 5 MB per image); the message says the image could not be included."""
DEFAULT_IMAGE_FETCH_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class CompressionSettings:
    """The slice of settings the context engine needs."""

    enabled: bool = True
    engine: str = DEFAULT_CONTEXT_ENGINE
    """Which registered context engine runs (``compressor`` is built in)."""
    threshold: float = DEFAULT_COMPRESSION_RATIO
    hygiene_threshold: float = DEFAULT_HYGIENE_RATIO
    hard_message_limit: int = DEFAULT_HARD_MESSAGE_LIMIT
    target_ratio: float = DEFAULT_TARGET_RATIO
    protect_first_n: int = DEFAULT_PROTECT_FIRST_N
    protect_last_n: int = DEFAULT_PROTECT_LAST_N
    model: str | None = None
    """Summary (auxiliary) model; ``None`` means the main model."""
    context_length: int | None = None
    """The summary model's window, when litellm does not know it."""
    in_place: bool = True
    abort_on_summary_failure: bool = False
    lease_seconds: float = DEFAULT_COMPACTION_LEASE_SECONDS
    idle_seconds: float = DEFAULT_COMPACTION_IDLE_SECONDS
    summary_concurrency: int = DEFAULT_SUMMARY_CONCURRENCY
    timezone: str = "UTC"
    """The zone of the summaries' dates, the same as the system prompt's."""


class ModelPrice(BaseModel):
    """USD per token of one model (an entry of the ``HUBBUB_MODEL_COSTS`` file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    """Prompt tokens served from the provider's cache; unset: the input price."""


def load_model_prices(path: Path) -> dict[str, ModelPrice]:
    """The prices of a ``HUBBUB_MODEL_COSTS`` file (YAML, or JSON when it ends in ``.json``).

    Raises:
        ValueError: the file cannot be read, or is not a mapping of model to prices.
    """
    try:
        text = path.read_text(encoding="utf-8")
        raw: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(
            f"{path} must map model names to {{input: <USD per token>, output: <USD per token>}}"
        )
    try:
        return {str(model): ModelPrice.model_validate(value) for model, value in raw.items()}
    except ValidationError as exc:
        raise ValueError(f"{path}: {exc}") from exc


class McpServerConfig(BaseModel):
    """One Model Context Protocol server: a command over stdio, or a streamable HTTP URL.

    Values of ``env`` and ``headers`` are secrets: never logged, never shown.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    timeout: float | None = Field(None, gt=0)
    """Seconds per tool call; ``HUBBUB_MCP_CALL_TIMEOUT`` when unset."""
    groups: bool = True
    """Whether its tools are offered in group chats."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs either `command` (stdio) or `url` (HTTP)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("`args` and `env` belong to stdio servers (`command`)")
        if self.command is not None and self.headers:
            raise ValueError("`headers` belong to HTTP servers (`url`)")
        return self


MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
"""Letters, digits, ``-`` and single ``_``: ``__`` separates server and tool in tool names."""


def check_mcp_server_name(name: str) -> str:
    """``name`` if it can prefix tool names, else a ``ValueError`` saying what is allowed."""
    if not MCP_SERVER_NAME.match(name) or name.endswith("_"):
        raise ValueError(
            f"MCP server name {name!r}: use up to 32 letters, digits, '-' and '_' "
            "(not '__', not at the start or end)"
        )
    return name


McpServerName = Annotated[str, AfterValidator(check_mcp_server_name)]
"""A server name checked on its own, so a refusal never echoes the server's secrets."""


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """The slice of settings the agent's tools need."""

    enabled: frozenset[str] | None = None
    """Tool names or ``fnmatch`` patterns (``github__*``); ``None``: every built-in and
    every configured MCP server's tools."""
    listing_budget: float = DEFAULT_TOOL_LISTING_BUDGET
    max_chars: int = DEFAULT_TOOL_MAX_CHARS
    max_lines: int = DEFAULT_TOOL_MAX_LINES
    max_line_length: int = DEFAULT_TOOL_MAX_LINE_LENGTH
    result_budget: float = DEFAULT_TOOL_RESULT_BUDGET
    turn_budget: float = DEFAULT_TOOL_TURN_BUDGET
    mcp_call_timeout: float = DEFAULT_MCP_CALL_TIMEOUT_SECONDS
    mcp_start_timeout: float = DEFAULT_MCP_START_TIMEOUT_SECONDS
    memory_max_entry_chars: int = DEFAULT_MEMORY_MAX_ENTRY_CHARS
    memory_max_entries: int = DEFAULT_MEMORY_MAX_ENTRIES
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """The slice of settings a model call needs."""

    model: str | None
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = DEFAULT_LLM_TIMEOUT_SECONDS
    max_retries: int = DEFAULT_LLM_MAX_RETRIES
    """Retries of the last model of the chain only; the others hand over at once."""
    fallbacks: tuple[str, ...] = ()
    """Models tried in order when ``model`` fails (429, 5xx, timeout)."""
    endpoints: tuple[tuple[str, str], ...] = ()
    """(model, api_base) pairs: a model's own endpoint instead of ``api_base``."""
    context_length: int | None = None
    max_output_tokens: int | None = None
    prompt_cache_ttl: CacheTTL = "5m"


class Settings(BaseSettings):
    """Hubbub's configuration. Environment variables use the ``HUBBUB_`` prefix.

    A YAML file named by ``HUBBUB_CONFIG`` (or ``<home>/config.yaml`` when it exists) supplies
    values too; the environment wins over the file.
    """

    model_config = SettingsConfigDict(
        env_prefix="HUBBUB_",
        extra="ignore",
        validate_default=True,
        populate_by_name=True,
        hide_input_in_errors=True,
    )

    home: Path = DEFAULT_HOME
    database_url: str | None = None
    redis_url: str | None = None
    model: str | None = None
    llm_api_base: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout: float = Field(DEFAULT_LLM_TIMEOUT_SECONDS, gt=0)
    llm_max_retries: int = Field(DEFAULT_LLM_MAX_RETRIES, ge=0)
    fallback_models: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Models a call moves to, in order, when the one before fails (429, 5xx, timeout)."""
    models: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """The models ``/model`` may switch a session to; empty: the main and fallback models."""
    model_endpoints: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """Model -> ``api_base`` (JSON in the environment) for models served elsewhere than
    ``HUBBUB_LLM_API_BASE``."""
    context_length: int | None = Field(None, gt=0)
    max_output_tokens: int | None = Field(None, gt=0)
    prompt_cache_ttl: CacheTTL = "5m"

    host: str = DEFAULT_HOST
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    public_url: str | None = None
    internal_port: int | None = Field(None, ge=1, le=65535)
    """When set, /docs, /openapi.json and /metrics are served only on this port, not on
    ``port``: keep them off the public listener."""
    internal_host: str = DEFAULT_INTERNAL_HOST
    """Interface of the internal listener (``0.0.0.0`` in a pod, for metrics scraping)."""
    webchat: WebchatMode = DEFAULT_WEBCHAT_MODE
    """``off`` (no page, no API), ``local`` (loopback clients only) or ``public`` (each
    conversation belongs to the browser that started it)."""
    webchat_secret: SecretStr | None = None
    """Signs the public web chat's browser cookie; unset: derived from the secret key."""
    webchat_cookie_days: int = Field(DEFAULT_WEBCHAT_COOKIE_DAYS, ge=1)
    console_session_hours: int = Field(DEFAULT_CONSOLE_SESSION_HOURS, ge=1, le=24 * 30)
    """How long a console sign-in lasts before the key must be entered again."""
    max_message_chars: int = Field(DEFAULT_MAX_MESSAGE_CHARS, gt=0)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    """Larger request bodies get a 413 before they are read (webhooks before verification)."""

    # Images (issue 13 §4)
    image_max_bytes: int = Field(DEFAULT_IMAGE_MAX_BYTES, gt=0)
    """An image larger than this is not included; the model is told one was sent."""
    image_fetch_timeout_seconds: float = Field(DEFAULT_IMAGE_FETCH_TIMEOUT_SECONDS, gt=0)
    """How long the worker waits on the platform for one image before going on without it."""
    vision_models: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Models that read images although litellm's model map does not say so (``ollama/llava``,
    a self-hosted server's names); the others are judged by ``litellm.supports_vision``."""

    persona: str = DEFAULT_PERSONA
    instructions: str | None = None
    """Operator-supplied instructions for the prompt's context layer."""
    context_files: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    """Files whose text joins the prompt's context layer (truncated to fit the window)."""
    timezone: str = "UTC"

    worker_concurrency: int = Field(DEFAULT_WORKER_CONCURRENCY, ge=1)
    turn_lease_seconds: float = Field(DEFAULT_TURN_LEASE_SECONDS, gt=0)
    sweep_interval_seconds: float = Field(DEFAULT_SWEEP_INTERVAL_SECONDS, gt=0)
    visibility_timeout_seconds: int = Field(DEFAULT_VISIBILITY_TIMEOUT_SECONDS, gt=0)
    delivery_max_attempts: int = Field(DEFAULT_DELIVERY_MAX_ATTEMPTS, ge=1)

    compression_enabled: bool = True
    compression_engine: str = DEFAULT_CONTEXT_ENGINE
    compression_threshold: float = Field(DEFAULT_COMPRESSION_RATIO, gt=0, lt=1)
    compression_hygiene_threshold: float = Field(DEFAULT_HYGIENE_RATIO, gt=0, lt=1)
    compression_hard_message_limit: int = Field(DEFAULT_HARD_MESSAGE_LIMIT, ge=10)
    compression_target_ratio: float = Field(DEFAULT_TARGET_RATIO, gt=0, lt=1)
    compression_protect_first_n: int = Field(DEFAULT_PROTECT_FIRST_N, ge=0)
    compression_protect_last_n: int = Field(DEFAULT_PROTECT_LAST_N, ge=1)
    compression_model: str | None = None
    compression_context_length: int | None = Field(None, gt=0)
    compression_in_place: bool = True
    compression_abort_on_summary_failure: bool = False
    compression_lease_seconds: float = Field(DEFAULT_COMPACTION_LEASE_SECONDS, gt=0)
    compression_idle_seconds: float = Field(DEFAULT_COMPACTION_IDLE_SECONDS, ge=0)
    """A session quiet this long is compacted down if it grew meanwhile (0: never)."""
    compression_summary_concurrency: int = Field(DEFAULT_SUMMARY_CONCURRENCY, ge=1, le=32)
    """Chunk summaries of one compaction that run at once."""

    trigger_mode: TriggerMode = "mention"
    """When env-configured bots answer in groups: ``mention``, ``all`` or ``commands``."""
    answer_bots: bool = False
    """Whether env-configured bots answer other bots (never themselves)."""
    allow_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """If set, only these platform user ids reach env-configured bots (comma-separated)."""
    allow_chats: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """If set, only these chat ids reach env-configured bots (comma-separated)."""
    telegram_token: SecretStr | None = None
    telegram_api_base: str | None = None
    telegram_webhook_secret: SecretStr | None = None
    """Checked against ``X-Telegram-Bot-Api-Secret-Token``; required for webhook mode."""
    telegram_mode: TelegramMode = "auto"
    """How the env Telegram bot receives: ``webhook``, ``polling``, or ``auto`` (webhook when
    ``HUBBUB_PUBLIC_URL`` is set, else long polling)."""
    discord_token: SecretStr | None = None
    discord_api_base: str | None = None
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_base: str | None = None

    secret_key: SecretStr | None = None
    """Fernet key that encrypts bot credentials at rest; generated under ``home`` if unset."""
    worker_metrics_port: int = Field(DEFAULT_WORKER_METRICS_PORT, ge=0, le=65535)
    """Where a Celery worker serves /metrics (0 turns it off); the gateway serves its own."""
    shutdown_grace_seconds: float = Field(DEFAULT_SHUTDOWN_GRACE_SECONDS, ge=0)

    tools: Annotated[list[str] | None, NoDecode] = None
    """Tools the env-configured bots offer (names or patterns, comma-separated); unset: all."""
    agent_max_iterations: int = Field(DEFAULT_AGENT_MAX_ITERATIONS, ge=1, le=100)
    tool_listing_budget: float = Field(DEFAULT_TOOL_LISTING_BUDGET, gt=0, lt=1)
    tool_max_chars: int = Field(DEFAULT_TOOL_MAX_CHARS, ge=1_000)
    tool_max_lines: int = Field(DEFAULT_TOOL_MAX_LINES, ge=10)
    tool_max_line_length: int = Field(DEFAULT_TOOL_MAX_LINE_LENGTH, ge=100)
    tool_result_budget: float = Field(DEFAULT_TOOL_RESULT_BUDGET, gt=0, lt=1)
    tool_turn_budget: float = Field(DEFAULT_TOOL_TURN_BUDGET, gt=0, lt=1)
    mcp_servers: dict[McpServerName, McpServerConfig] = Field(default_factory=dict)
    """Operator MCP servers, name -> server (``mcp_servers:`` in config.yaml)."""
    mcp_call_timeout: float = Field(DEFAULT_MCP_CALL_TIMEOUT_SECONDS, gt=0)
    mcp_start_timeout: float = Field(DEFAULT_MCP_START_TIMEOUT_SECONDS, gt=0)
    memory_max_entry_chars: int = Field(DEFAULT_MEMORY_MAX_ENTRY_CHARS, ge=20)
    memory_max_entries: int = Field(DEFAULT_MEMORY_MAX_ENTRIES, ge=1)
    budget_reservation_seconds: float = Field(DEFAULT_BUDGET_RESERVATION_SECONDS, gt=0)
    """How long the estimate held for a call in flight counts when its worker died."""
    model_costs: Path | None = None
    """A YAML or JSON file of USD per token for models litellm's price map does not know
    (``openai/my-model: {input: 0.0000005, output: 0.0000015}``)."""

    # Busy modes and /stop (agent_core.busy).
    busy_mode: BusyModeName = DEFAULT_BUSY_MODE
    """What messages arriving during a running turn do, for bots (and tenants) without
    their own: ``queue``, ``collect``, ``interrupt`` or ``steer``."""
    collect_window_seconds: float = Field(DEFAULT_COLLECT_WINDOW_SECONDS, ge=0, le=60)
    """``collect``: how long after the first of several quick messages the turn waits for
    the rest before it answers them together."""

    rate_limit_user: str = DEFAULT_RATE_LIMIT_USER
    """Turns per sender and bot, e.g. ``10/minute;100/hour``; empty or ``off``: no limit."""
    rate_limit_chat: str = DEFAULT_RATE_LIMIT_CHAT
    """Turns per chat and bot, same notation."""

    # -- hosted control plane --
    settings_refresh_seconds: float = Field(DEFAULT_SETTINGS_REFRESH_SECONDS, gt=0, le=3600)
    """A change to a tenant's or bot's settings made elsewhere (another gateway, the CLI)
    is seen by this process within this many seconds; its own admin API's at once."""
    # Streamed replies (issue 13 §1).
    streaming: bool = DEFAULT_STREAMING
    """Replies grow in their platform message (in the web chat page) while the model writes
    (``on``/``off``); a bot's ``streaming`` setting overrides it."""
    stream_edit_interval: float = Field(DEFAULT_STREAM_EDIT_INTERVAL_SECONDS, gt=0)
    """Seconds between draft calls (send or edit) of one streamed reply on Telegram."""
    stream_edit_interval_discord: float = Field(DEFAULT_STREAM_EDIT_INTERVAL_DISCORD_SECONDS, gt=0)
    stream_edit_interval_slack: float = Field(DEFAULT_STREAM_EDIT_INTERVAL_SLACK_SECONDS, gt=0)
    stream_edit_interval_webchat: float = Field(DEFAULT_STREAM_EDIT_INTERVAL_WEBCHAT_SECONDS, gt=0)
    """Seconds between the drafts a web chat page is sent of one streamed reply."""
    # Fleet-wide platform rate limits (issue 13 §5).
    platform_limits: dict[str, dict[str, str]] = Field(
        default_factory=lambda: copy.deepcopy(DEFAULT_PLATFORM_LIMITS)
    )
    """Overrides of :data:`DEFAULT_PLATFORM_LIMITS`, as JSON: ``{"telegram": {"group":
    "10/minute"}}`` changes that one limit and keeps the others."""
    platform_max_wait_seconds: float = Field(DEFAULT_PLATFORM_MAX_WAIT_SECONDS, ge=0, le=60)

    otel_exporter_otlp_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT", "otel_exporter_otlp_endpoint"),
    )
    """OTLP/HTTP collector (``http://collector:4318``): set, every process exports traces
    there; unset, tracing is off. OpenTelemetry's own variable, not a ``HUBBUB_`` one."""
    log_level: str = "INFO"
    log_json: bool = True

    @field_validator("model", "llm_api_base", "redis_url", "database_url", "compression_model")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("database_url")
    @classmethod
    def _postgres_scheme(cls, value: str | None) -> str | None:
        # Heroku-style hosts hand out postgres://, a scheme SQLAlchemy no longer accepts.
        if value is not None and value.startswith(POSTGRES_SHORT_SCHEME):
            return "postgresql://" + value.removeprefix(POSTGRES_SHORT_SCHEME)
        return value

    @field_validator(
        "allow_users",
        "allow_chats",
        "context_files",
        "tools",
        "vision_models",
        "fallback_models",
        "models",
        mode="before",
    )
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("model_endpoints", mode="before")
    @classmethod
    def _endpoints_json(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(
                'write HUBBUB_MODEL_ENDPOINTS as JSON: {"provider/model": "http://host/v1"}'
            ) from None

    @field_validator("model_costs")
    @classmethod
    def _readable_prices(cls, value: Path | None) -> Path | None:
        if value is not None:
            load_model_prices(value)
        return value

    @property
    def model_prices(self) -> dict[str, ModelPrice]:
        """The operator's model prices (empty without ``HUBBUB_MODEL_COSTS``)."""
        return load_model_prices(self.model_costs) if self.model_costs is not None else {}

    @field_validator("rate_limit_user", "rate_limit_chat")
    @classmethod
    def _rate_limits(cls, value: str) -> str:
        value = value.strip()
        if value.lower() in ("", "off"):
            return ""
        try:
            limits.parse_many(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a rate limit: write e.g. '10/minute' or "
                "'10/minute;100/hour' (or 'off')"
            ) from None
        return value

    @field_validator("platform_limits")
    @classmethod
    def _platform_limits(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        merged = copy.deepcopy(DEFAULT_PLATFORM_LIMITS)
        for platform, overrides in value.items():
            if platform not in merged:
                raise ValueError(
                    f"HUBBUB_PLATFORM_LIMITS: no rate limits for platform {platform!r} "
                    f"(known: {', '.join(sorted(merged))})"
                )
            for name, text in overrides.items():
                if text.strip() != "off":
                    try:
                        item = limits.parse(text)
                    except ValueError:
                        item = None
                    if item is None or item.amount < 1:
                        raise ValueError(
                            f"HUBBUB_PLATFORM_LIMITS: {platform}.{name} = {text!r} is not a "
                            "rate: write e.g. '1/second', '20/minute', '5/5 seconds' or 'off'"
                        )
                merged[platform][name] = text.strip()
        return merged

    @field_validator("compression_in_place")
    @classmethod
    def _in_place_only(cls, value: bool) -> bool:
        if not value:
            raise ValueError(
                "HUBBUB_COMPRESSION_IN_PLACE=false (rotating to a new session on compaction) "
                "is not supported: Hubbub compacts in place and keeps the session id"
            )
        return value

    @model_validator(mode="after")
    def _check_internal_port(self) -> Settings:
        if self.internal_port is not None and self.internal_port == self.port:
            raise ValueError(
                "HUBBUB_INTERNAL_PORT must differ from HUBBUB_PORT (it is a second listener)"
            )
        return self

    @model_validator(mode="after")
    def _check_models(self) -> Settings:
        if self.models and self.model and self.model not in self.models:
            raise ValueError(
                f"HUBBUB_MODEL {self.model} is not in HUBBUB_MODELS ({', '.join(self.models)}): "
                "add it there, or leave HUBBUB_MODELS unset"
            )
        return self

    @model_validator(mode="after")
    def _check_thresholds(self) -> Settings:
        if self.compression_hygiene_threshold < self.compression_threshold:
            raise ValueError(
                "HUBBUB_COMPRESSION_HYGIENE_THRESHOLD must not be below "
                "HUBBUB_COMPRESSION_THRESHOLD (hygiene is the safety net above the compressor)"
            )
        return self

    @classmethod
    def settings_customise_sources(  # noqa: D102 (pydantic-settings hook)
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        yaml_file = _yaml_file()
        if yaml_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file))
        return tuple(sources)

    @property
    def resolved_database_url(self) -> str:
        """The database URL; the embedded default is a SQLite file under ``home``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.home / 'hubbub.db').resolve()}"

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: turns run in the gateway process."""
        return self.redis_url is None

    @property
    def llm(self) -> LLMSettings:
        """Settings for calls to the main model."""
        return LLMSettings(
            model=self.model,
            api_base=self.llm_api_base,
            api_key=self.llm_api_key.get_secret_value() if self.llm_api_key else None,
            timeout=self.llm_timeout,
            max_retries=self.llm_max_retries,
            fallbacks=tuple(m for m in self.fallback_models if m != self.model),
            endpoints=tuple(sorted(self.model_endpoints.items())),
            context_length=self.context_length,
            max_output_tokens=self.max_output_tokens,
            prompt_cache_ttl=self.prompt_cache_ttl,
        )

    @property
    def allowed_models(self) -> tuple[str, ...]:
        """What ``/model`` offers: ``HUBBUB_MODELS``, else the main and fallback models."""
        listed = self.models or [m for m in (self.model, *self.fallback_models) if m]
        return tuple(dict.fromkeys(listed))

    @property
    def tool_settings(self) -> ToolSettings:
        """Settings for the agent's tools."""
        return ToolSettings(
            enabled=frozenset(self.tools) if self.tools is not None else None,
            listing_budget=self.tool_listing_budget,
            max_chars=self.tool_max_chars,
            max_lines=self.tool_max_lines,
            max_line_length=self.tool_max_line_length,
            result_budget=self.tool_result_budget,
            turn_budget=self.tool_turn_budget,
            mcp_call_timeout=self.mcp_call_timeout,
            mcp_start_timeout=self.mcp_start_timeout,
            memory_max_entry_chars=self.memory_max_entry_chars,
            memory_max_entries=self.memory_max_entries,
            timezone=self.timezone,
        )

    @property
    def compression(self) -> CompressionSettings:
        """Settings for the context engine."""
        return CompressionSettings(
            enabled=self.compression_enabled,
            engine=self.compression_engine,
            threshold=self.compression_threshold,
            hygiene_threshold=self.compression_hygiene_threshold,
            hard_message_limit=self.compression_hard_message_limit,
            target_ratio=self.compression_target_ratio,
            protect_first_n=self.compression_protect_first_n,
            protect_last_n=self.compression_protect_last_n,
            model=self.compression_model,
            context_length=self.compression_context_length,
            in_place=self.compression_in_place,
            abort_on_summary_failure=self.compression_abort_on_summary_failure,
            lease_seconds=self.compression_lease_seconds,
            idle_seconds=self.compression_idle_seconds,
            summary_concurrency=self.compression_summary_concurrency,
            timezone=self.timezone,
        )


def _yaml_file() -> Path | None:
    explicit = os.environ.get(CONFIG_FILE_ENV)
    if explicit:
        return Path(explicit)
    home = Path(os.environ.get("HUBBUB_HOME", str(DEFAULT_HOME)))
    candidate = home / "config.yaml"
    return candidate if candidate.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment and the optional YAML file.

    Raises:
        pydantic.ValidationError: a value is malformed; the message names the setting.
        FileNotFoundError: ``HUBBUB_CONFIG`` names a file that does not exist.
    """
    yaml_file = _yaml_file()
    if yaml_file is not None and not yaml_file.is_file():
        raise FileNotFoundError(f"{CONFIG_FILE_ENV}={yaml_file} does not exist")
    return Settings(**overrides)
