"""Everything one process needs to accept messages and run turns, built from settings."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from agent_core import tracing
from agent_core.agent import AgentServices
from agent_core.compaction.runner import Compactor
from agent_core.compaction.triggers import BackgroundRing, Lines
from agent_core.config import Settings
from agent_core.context.warmup import warm_compressor
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory
from agent_core.heap import freeze_startup_heap
from agent_core.llm.costs import CostTable
from agent_core.llm.model import ChatModel
from agent_core.llm.models import ModelSet
from agent_core.prompt.assembler import PromptAssembler
from agent_core.tenancy.settings import TenantDefaults
from agent_core.tokens import TokenCounter
from agent_core.tools import config_specs
from agent_core.tools.kit import ToolKit
from agent_core.usage import SYSTEM_CLOCK, Budgets, Clock, UsageLedger, UsageServices
from workers import metrics
from workers.bots import BotDirectory
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher
from workers.inbound_limits import InboundLimiter
from workers.intake import Intake
from workers.media import MediaFetchStep
from workers.sweeper import IdleCompaction
from workers.turns import TurnRunner

log = logging.getLogger(__name__)

SERVICE_NAME = "hubbub"
"""The traces' service name unless ``OTEL_SERVICE_NAME`` gives one."""


def tenant_lines(compactor: Compactor) -> Callable[[TenantDefaults], Lines | None]:
    """A tenant's compaction lines under its thresholds, computed once per distinct pair.

    Between turns they are read for every message of a busy group: the model is looked up
    once per distinct setting, not per message.
    """
    lines = functools.lru_cache(maxsize=256)(compactor.lines)
    return lambda tenant: lines(compactor.tenant_settings(tenant))


def idle_compaction(
    settings: Settings, lines: Callable[[TenantDefaults], Lines | None]
) -> IdleCompaction | None:
    """The quiet-session compaction rule for this deployment's model, if it is on."""
    deployment = lines(TenantDefaults())
    if deployment is None or settings.compression.idle_seconds <= 0:
        return None

    def tenant_line(tenant: TenantDefaults) -> int:
        own = lines(tenant)
        return own.idle if own is not None else deployment.idle

    return IdleCompaction(
        seconds=settings.compression.idle_seconds, min_tokens=deployment.idle, line=tenant_line
    )


def background_ring(
    lines: Callable[[TenantDefaults], Lines | None],
) -> Callable[[TenantDefaults], BackgroundRing | None]:
    """Where a tenant's busy groups ring for a compaction between turns (``None``: never)."""

    def ring(tenant: TenantDefaults) -> BackgroundRing | None:
        found = lines(tenant)
        return BackgroundRing.of(found) if found is not None else None

    return ring


class Runtime:
    """The process's database, bots, delivery, intake and turn runner.

    Args:
        settings: the process's settings.
        dispatcher_factory: builds the dispatcher once the runtime exists (the embedded
            dispatcher runs this runtime's turns; the Celery one only sends tasks).
        model_factory: builds the chat model for each turn (tests may pass their own).
        clock: the time usage is stamped with and budget periods are read from (tests
            move their own).
    """

    def __init__(
        self,
        settings: Settings,
        dispatcher_factory: Callable[[Runtime], Dispatcher],
        *,
        model_factory: Callable[[], ChatModel] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        tracing.configure(settings.otel_exporter_otlp_endpoint, service=SERVICE_NAME)
        self.engine: Engine = create_db_engine(settings.resolved_database_url)
        self.factory: sessionmaker[Session] = make_session_factory(self.engine)
        secret = settings.secret_key.get_secret_value() if settings.secret_key else None
        self.secret_key = load_or_create_key(secret, settings.home)
        """The deployment's Fernet key (configured, or generated under ``home``)."""
        box = CredentialBox(self.secret_key)
        self.bots = BotDirectory(settings, self.factory, box)
        self.counter = TokenCounter.for_model(settings.model)
        self.delivery = DeliveryService(
            self.factory, self.bots, max_attempts=settings.delivery_max_attempts
        )
        self.stopping = threading.Event()
        self.models = ModelSet(settings, main=model_factory)
        prompts = PromptAssembler(settings)
        costs = CostTable(settings.model_prices)
        self.usage = UsageServices(
            UsageLedger(self.factory, costs, clock=clock, on_charge=metrics.count_charge),
            Budgets(
                costs,
                timezone=settings.timezone,
                clock=clock,
                reservation_seconds=settings.budget_reservation_seconds,
            ),
        )
        self.compactor = Compactor(
            settings.compression,
            self.factory,
            self.counter,
            self.models,
            prompts,
            ledger=self.usage.ledger,
            budgets=self.usage.budgets,
        )
        self.lines = tenant_lines(self.compactor)
        """A tenant's compaction lines (``None``: compaction is off or there is no model)."""
        self.idle = idle_compaction(settings, self.lines)
        self.tools = ToolKit(
            settings.tool_settings, configured=config_specs(settings.mcp_servers), box=box
        )
        self.agents = AgentServices(
            self.factory,
            self.counter,
            self.models,
            prompts,
            self.compactor,
            tools=self.tools,
            max_iterations=settings.agent_max_iterations,
            usage=self.usage,
        )
        self.media = MediaFetchStep(
            self.factory,
            self.bots,
            max_bytes=settings.image_max_bytes,
            timeout=settings.image_fetch_timeout_seconds,
        )
        self.turns = TurnRunner(
            settings, self.agents, self.delivery, stopping=self.stopping, media=self.media
        )
        self.dispatcher = dispatcher_factory(self)
        self.turns.dispatcher = self.dispatcher
        self.intake = Intake(
            self.factory,
            self.bots,
            self.counter,
            self.dispatcher,
            max_message_chars=settings.max_message_chars,
            background=background_ring(self.lines),
            limiter=InboundLimiter.from_settings(settings),
        )
        warm_compressor()
        freeze_startup_heap()

    def close(self) -> None:
        """Release connections and clients."""
        self.stopping.set()
        self.delivery.close()
        self.media.close()
        self.tools.close()
        self.engine.dispose()
