"""Bot lookups for the pipeline: ids for incoming messages, platform configs for delivery.

A bot configured from the environment is called ``default`` on its platform and is created
in the database on first contact; bots of other tenants are rows with sealed credentials.
A bot's unset trigger mode and allowlists are its tenant's (``agent_core.tenancy.settings``).

What is read is cached for ``refresh_seconds`` and then read again, so a change made by
another process (the admin API of another gateway, the CLI) is seen within that time; the
admin API of this process drops the tenant's entries as its change commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from adapters.base import BotConfig
from adapters.pacing import PacingConfig, parse_limits
from adapters.webchat.deliverer import FEED_URL
from agent_core.config import Settings
from agent_core.crypto import CredentialBox
from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Bot, Tenant
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tenancy.settings import TenantDefaults, effective_trigger_mode

ENV_BOT_NAME = "default"


@dataclass(frozen=True, slots=True)
class BotRecord:
    """What accepting a message needs to know about its bot."""

    id: int
    tenant_id: str
    platform: str
    name: str
    trigger_mode: str
    answer_bots: bool
    tenant: TenantDefaults
    """The tenant's stored settings, as read with the bot."""


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def pacing_config(settings: Settings, platform: str) -> PacingConfig:
    """How ``platform``'s bots are paced: its limits, shared through Redis when there is one."""
    return PacingConfig(
        limits=parse_limits(settings.platform_limits.get(platform, {})),
        max_wait_seconds=settings.platform_max_wait_seconds,
        redis_url=settings.redis_url,
    )


def env_bot_config(settings: Settings, platform: str) -> BotConfig | None:
    """The environment-configured bot of ``platform``, or ``None`` when it has no credentials."""
    common: dict[str, Any] = {
        "platform": platform,
        "bot_name": ENV_BOT_NAME,
        "tenant_id": DEFAULT_TENANT_ID,
        "trigger_mode": settings.trigger_mode,
        "allow_users": frozenset(settings.allow_users),
        "allow_chats": frozenset(settings.allow_chats),
        "answer_bots": settings.answer_bots,
        "image_max_bytes": settings.image_max_bytes,
        "pacing": pacing_config(settings, platform),
    }
    if platform == "webchat":
        return BotConfig(**common, extra={FEED_URL: settings.redis_url})
    if platform == "telegram" and settings.telegram_token:
        return BotConfig(
            **common,
            token=_secret(settings.telegram_token),
            api_base=settings.telegram_api_base,
            extra={
                "webhook_secret": _secret(settings.telegram_webhook_secret),
                "public_url": settings.public_url,
                "mode": settings.telegram_mode,
            },
        )
    if platform == "discord" and settings.discord_token:
        return BotConfig(
            **common, token=_secret(settings.discord_token), api_base=settings.discord_api_base
        )
    if platform == "slack" and settings.slack_bot_token:
        return BotConfig(
            **common,
            token=_secret(settings.slack_bot_token),
            api_base=settings.slack_api_base,
            extra={
                "signing_secret": _secret(settings.slack_signing_secret),
                "app_token": _secret(settings.slack_app_token),
            },
        )
    return None


K = TypeVar("K")
V = TypeVar("V")


class _Fresh(Generic[K, V]):
    """Values read at a time, given out until they are ``max_age`` seconds old."""

    def __init__(self, max_age: float, clock: Callable[[], float]) -> None:
        self._max_age = max_age
        self._clock = clock
        self._values: dict[K, tuple[float, str, V]] = {}

    def get(self, key: K) -> V | None:
        found = self._values.get(key)
        if found is None or self._clock() - found[0] >= self._max_age:
            return None
        return found[2]

    def put(self, key: K, tenant_id: str, value: V) -> None:
        self._values[key] = (self._clock(), tenant_id, value)

    def drop_tenant(self, tenant_id: str) -> None:
        self._values = {k: v for k, v in self._values.items() if v[1] != tenant_id}


class BotDirectory:
    """Caches bot ids and configs for a short time; safe to share between threads.

    Args:
        settings: the process's settings (env bots, deployment defaults).
        factory: opens units of work.
        box: opens sealed credentials.
        refresh_seconds: how long a bot and its tenant's settings are used before they
            are read again; ``HUBBUB_SETTINGS_REFRESH_SECONDS`` when unset.
        clock: monotonic seconds (tests move their own).
    """

    def __init__(
        self,
        settings: Settings,
        factory: sessionmaker[Session],
        box: CredentialBox,
        *,
        refresh_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._factory = factory
        self._box = box
        max_age = settings.settings_refresh_seconds if refresh_seconds is None else refresh_seconds
        self._records: _Fresh[tuple[str, str, str], BotRecord] = _Fresh(max_age, clock)
        self._configs: _Fresh[int, BotConfig] = _Fresh(max_age, clock)
        self._lock = threading.Lock()

    def forget(self, tenant_id: str) -> None:
        """Read the tenant's bots and settings again at their next use (they changed)."""
        with self._lock:
            self._records.drop_tenant(tenant_id)
            self._configs.drop_tenant(tenant_id)

    def resolve(self, tenant_id: str, platform: str, name: str) -> BotRecord | None:
        """The bot a message arrived for; env bots are created on first contact."""
        key = (tenant_id, platform, name)
        with self._lock:
            cached = self._records.get(key)
        if cached is not None:
            return cached
        with transaction(self._factory) as db:
            repo = TenancyRepository.from_session(db)
            bot = repo.get_bot_by_name(tenant_id, platform, name)
            if bot is None:
                env = env_bot_config(self._settings, platform)
                if env is None or name != ENV_BOT_NAME or tenant_id != DEFAULT_TENANT_ID:
                    return None
                repo.ensure_default_tenant()
                bot = repo.ensure_bot(
                    tenant_id,
                    platform,
                    name,
                    trigger_mode=env.trigger_mode,
                    answer_bots=env.answer_bots,
                    settings={},
                )
            record = _record(bot, _defaults(db, bot), self._settings.trigger_mode)
        with self._lock:
            self._records.put(key, tenant_id, record)
        return record

    def config(self, bot_id: int) -> BotConfig:
        """The platform settings to deliver as this bot.

        Raises:
            KeyError: the bot does not exist or its platform has no credentials.
        """
        with self._lock:
            cached = self._configs.get(bot_id)
        if cached is not None:
            return cached
        with transaction(self._factory) as db:
            bot = TenancyRepository.from_session(db).get_bot(bot_id)
            if bot is None:
                raise KeyError(f"bot {bot_id} does not exist")
            config = self._config_for(bot, _defaults(db, bot))
        with self._lock:
            self._configs.put(bot_id, config.tenant_id, config)
        return config

    def _config_for(self, bot: Bot, tenant: TenantDefaults) -> BotConfig:
        if bot.credentials is None and bot.name == ENV_BOT_NAME:
            env = env_bot_config(self._settings, bot.platform)
            if env is None:
                raise KeyError(f"{bot.platform} bot {bot.name!r} has no credentials configured")
            return env
        secrets = self._box.open(bot.credentials) if bot.credentials else {}
        # The deployment's public URL applies to every bot unless a bot sets its own.
        options = {"public_url": self._settings.public_url, **(bot.settings or {})}
        return BotConfig(
            platform=bot.platform,
            bot_name=bot.name,
            tenant_id=bot.tenant_id,
            token=secrets.pop("token", None),
            api_base=options.pop("api_base", None),
            trigger_mode=effective_trigger_mode(
                bot.trigger_mode, tenant, self._settings.trigger_mode
            ),
            answer_bots=bot.answer_bots,
            image_max_bytes=self._settings.image_max_bytes,
            allow_users=frozenset(options.pop("allow_users", None) or tenant.allow_users or ()),
            allow_chats=frozenset(options.pop("allow_chats", None) or tenant.allow_chats or ()),
            extra={**options, **secrets},
            pacing=pacing_config(self._settings, bot.platform),
        )


def _defaults(db: Session, bot: Bot) -> TenantDefaults:
    tenant = db.get(Tenant, bot.tenant_id)
    return TenantDefaults.from_json(tenant.settings if tenant is not None else None)


def _record(bot: Bot, tenant: TenantDefaults, deployment_mode: str) -> BotRecord:
    return BotRecord(
        id=bot.id,
        tenant_id=bot.tenant_id,
        platform=bot.platform,
        name=bot.name,
        trigger_mode=effective_trigger_mode(bot.trigger_mode, tenant, deployment_mode),
        answer_bots=bot.answer_bots,
        tenant=tenant,
    )
