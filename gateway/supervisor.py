"""What the gateway keeps running: platform connections per bot, and ``hubbub up``'s worker.

Listeners (Telegram long polling, the Discord gateway, Slack Socket Mode) run as tasks and
are restarted with back-off when they fail; webhook handlers are looked up by the route.
Their allowlist pre-checks read the bot directory, so a change of a tenant's settings or a
bot's config reaches them within ``HUBBUB_SETTINGS_REFRESH_SECONDS`` (at once when made
through this process's admin API), without a restart.
The worker child of ``hubbub up`` is restarted the same way whenever it exits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import subprocess
import threading
import time
from dataclasses import replace

from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError

from adapters.base import Allowlist, AllowlistSource, BotConfig, Listener, WebhookHandler
from adapters.messages import InboundMessage
from adapters.registry import create_listener, create_webhook
from agent_core.db.engine import transaction
from agent_core.db.models import DEFAULT_TENANT_ID, Bot
from agent_core.errors import InvalidInput
from agent_core.tenancy.names import NAME_RULE, is_valid_name
from agent_core.tenancy.repository import TenancyRepository
from workers import metrics
from workers.bots import ENV_BOT_NAME, env_bot_config
from workers.runtime import Runtime

log = logging.getLogger(__name__)

PLATFORMS = ("telegram", "discord", "slack")
RESTART_BASE_SECONDS = 1.0
RESTART_MAX_SECONDS = 60.0
HEALTHY_AFTER_SECONDS = 60.0
"""A listener or worker that ran this long before failing restarts its back-off from the start."""


def restart_delay(failures: int) -> float:
    """Seconds to wait before the ``failures``-th restart in a row (doubling, jittered)."""
    delay = min(RESTART_BASE_SECONDS * 2 ** (failures - 1), RESTART_MAX_SECONDS)
    return float(delay * random.uniform(0.8, 1.2))


def bot_path_id(config: BotConfig) -> str:
    """The ``{bot_id}`` of the bot's webhook URL: its name, prefixed by a non-default tenant."""
    if config.tenant_id == DEFAULT_TENANT_ID:
        return config.bot_name
    return f"{config.tenant_id}.{config.bot_name}"


def _named_well(bot: Bot) -> bool:
    """Whether a stored bot's tenant and name follow the name rule; logs why not.

    Bots stored before the rule existed may break it (a dot could take over another
    tenant's webhook path), so they are not started until re-added under a valid name.
    """
    if is_valid_name(bot.tenant_id) and is_valid_name(bot.name):
        return True
    log.error(
        "bot not started: its tenant id or name breaks the name rule (%s); remove it "
        "with `hubbub bots remove` and add it again under a valid name",
        NAME_RULE,
        extra={"platform": bot.platform, "tenant": bot.tenant_id, "bot": bot.name},
    )
    return False


class PlatformSupervisor:
    """Starts, watches and stops every configured bot's platform connection."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._webhooks: dict[tuple[str, str], WebhookHandler] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def sink(self, inbound: InboundMessage) -> None:
        """Store an inbound message and schedule its turn; bad input is logged and dropped."""
        try:
            await run_in_threadpool(self._runtime.intake.accept, inbound)
        except InvalidInput as exc:
            metrics.INBOUND.labels(inbound.platform, "rejected").inc()
            log.info(
                "inbound message refused", extra={"platform": inbound.platform, "reason": str(exc)}
            )

    def bot_configs(self) -> list[BotConfig]:
        """Every bot with platform credentials: env bots first, then database bots."""
        configs: list[BotConfig] = []
        for platform in PLATFORMS:
            config = env_bot_config(self._runtime.settings, platform)
            if config is not None:
                self._runtime.bots.resolve(DEFAULT_TENANT_ID, platform, ENV_BOT_NAME)
                configs.append(config)
        with transaction(self._runtime.factory) as db:
            stored = [
                b.id
                for b in TenancyRepository.from_session(db).list_bots()
                if b.platform in PLATFORMS and b.credentials is not None and _named_well(b)
            ]
        configs.extend(self._runtime.bots.config(bot_id) for bot_id in stored)
        return [replace(c, live_allowlist=self._allowlist_of(c)) for c in configs]

    def _allowlist_of(self, config: BotConfig) -> AllowlistSource:
        """The bot's allowlist as the bot directory has it now (refreshed, not from start)."""

        async def current() -> Allowlist:
            fresh = await run_in_threadpool(self._current_config, config)
            return Allowlist(fresh.allow_users, fresh.allow_chats)

        return current

    def _current_config(self, config: BotConfig) -> BotConfig:
        bots = self._runtime.bots
        try:
            record = bots.resolve(config.tenant_id, config.platform, config.bot_name)
            return bots.config(record.id) if record is not None else config
        except (KeyError, SQLAlchemyError):
            # Intake checks again on the stored message; until then, what the bot started with.
            log.warning(
                "bot settings unavailable; using the allowlist it started with",
                extra={"platform": config.platform, "bot": bot_path_id(config)},
            )
            return config

    async def start(self) -> None:
        """Build handlers and start listeners; a bot that fails to start is logged, not fatal."""
        for config in await run_in_threadpool(self.bot_configs):
            try:
                webhook = create_webhook(config, self.sink)
                if webhook is not None:
                    key = (config.platform, bot_path_id(config))
                    if key in self._webhooks:
                        raise RuntimeError(f"webhook path {key} is taken by another bot")
                    await webhook.initialize()
                    self._webhooks[key] = webhook
                listener = create_listener(config, self.sink)
                if listener is not None:
                    self._tasks.append(asyncio.create_task(self._supervise(listener)))
            except Exception:
                log.exception(
                    "platform bot failed to start",
                    extra={"platform": config.platform, "bot": bot_path_id(config)},
                )

    async def _supervise(self, listener: Listener) -> None:
        config = listener.config
        failures = 0
        while True:
            started = asyncio.get_running_loop().time()
            try:
                await listener.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                ran = asyncio.get_running_loop().time() - started
                failures = 1 if ran > HEALTHY_AFTER_SECONDS else failures + 1
                delay = restart_delay(failures)
                metrics.ERRORS.labels(f"{config.platform}_listener").inc()
                log.exception(
                    "platform listener failed, restarting",
                    extra={"platform": config.platform, "delay_seconds": round(delay, 1)},
                )
                await asyncio.sleep(delay)

    def webhook(self, platform: str, bot_id: str) -> WebhookHandler | None:
        """The handler for ``/webhooks/{platform}/{bot_id}``, if that bot exists."""
        return self._webhooks.get((platform, bot_id))

    async def stop(self) -> None:
        """Stop receiving: cancel listeners and close webhook handlers."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for handler in self._webhooks.values():
            try:
                await handler.shutdown()
            except Exception:
                log.warning("webhook handler shutdown failed", exc_info=True)
        self._webhooks.clear()


class WorkerSupervisor:
    """Runs the worker process of ``hubbub up`` and starts it again whenever it exits.

    A worker exits non-zero when it cannot carry on (and zero only when told to stop);
    either way, while the gateway runs, messages need a worker, so it is restarted with
    back-off. ``stop`` sends SIGTERM (running turns finish) and waits for the grace period.
    """

    def __init__(self, command: list[str], *, grace_seconds: float) -> None:
        self._command = command
        self._grace_seconds = grace_seconds
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, name="hubbub-worker-supervisor")

    def start(self) -> None:
        """Start the worker and watch it from a background thread."""
        self._thread.start()

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self._stopping.is_set():
                return None
            self._child = subprocess.Popen(self._command)  # noqa: S603 (our own command line)
        log.info("worker started", extra={"pid": self._child.pid})
        return self._child

    def _run(self) -> None:
        failures = 0
        while (child := self._spawn()) is not None:
            started = time.monotonic()
            code = child.wait()
            if self._stopping.is_set():
                return
            ran = time.monotonic() - started
            failures = 1 if ran > HEALTHY_AFTER_SECONDS else failures + 1
            delay = restart_delay(failures)
            metrics.ERRORS.labels("worker_exit").inc()
            log.warning(
                "worker exited, restarting",
                extra={"pid": child.pid, "exit_code": code, "delay_seconds": round(delay, 1)},
            )
            if self._stopping.wait(delay):
                return

    def stop(self) -> None:
        """Stop the worker (SIGTERM, then SIGKILL after the grace period) and stop watching."""
        with self._lock:
            self._stopping.set()
            child = self._child
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=self._grace_seconds + 10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self._thread.is_alive():
            self._thread.join()
