"""The ASGI app: web chat, webhooks, admin API, console, health, metrics; one runtime."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool

from adapters.webchat.feed import feed_for
from agent_core.config import Settings
from agent_core.llm.model import ChatModel
from agent_core.usage import SYSTEM_CLOCK, Clock
from gateway.access_log import quiet_polling
from gateway.console import routes as console
from gateway.console.sessions import store_for
from gateway.errors import documented, install_error_handlers
from gateway.limits import BodyLimit
from gateway.listeners import SplitListeners
from gateway.routes import admin, admin_usage, health, webchat, webchat_stream, webhooks
from gateway.routes.webchat_access import BrowserCookies, only_loopback
from gateway.routes.webchat_stream import StreamShutdown
from gateway.supervisor import PlatformSupervisor
from gateway.traced import ContinueTraces
from workers.broker import CeleryDispatcher, create_celery
from workers.dispatch import Dispatcher
from workers.embedded import EmbeddedRunner
from workers.runtime import Runtime

log = logging.getLogger(__name__)


def build_runtime(
    settings: Settings,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> tuple[Runtime, EmbeddedRunner | None]:
    """The runtime, with turns in-process when no broker is configured."""
    runner: EmbeddedRunner | None = None

    def dispatcher(runtime: Runtime) -> Dispatcher:
        nonlocal runner
        if settings.redis_url is None:
            runner = EmbeddedRunner(runtime)
            return runner
        return CeleryDispatcher(create_celery(settings))

    runtime = Runtime(settings, dispatcher, model_factory=model_factory, clock=clock)
    return runtime, runner


def create_app(
    settings: Settings,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """The gateway app (``clock``: what usage and budgets read the time from).

    Its lifespan starts the runtime and, on shutdown, answers what it accepted (embedded
    mode, up to the shutdown grace) before closing.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime, runner = await run_in_threadpool(
            build_runtime, settings, model_factory=model_factory, clock=clock
        )
        app.state.runtime = runtime
        if settings.webchat == "public":
            app.state.webchat_cookies = BrowserCookies.for_settings(settings, runtime.secret_key)
        if runner is not None:
            await run_in_threadpool(runner.start)
        supervisor = PlatformSupervisor(runtime)
        app.state.supervisor = supervisor
        await supervisor.start()
        log.info(
            "gateway started",
            extra={
                "database": runtime.engine.dialect.name,
                "broker": "embedded" if runner is not None else "redis",
                "model": settings.model,
                "webchat": settings.webchat,
            },
        )
        try:
            yield
        finally:
            await supervisor.stop()
            if runner is not None:
                await run_in_threadpool(runner.stop, settings.shutdown_grace_seconds)
            await run_in_threadpool(runtime.close)
            await app.state.webchat_feed.aclose()
            app.state.console_sessions.close()
            log.info("gateway stopped")

    quiet_polling()
    app = FastAPI(title="Hubbub", version="0.1.0", lifespan=lifespan)
    app.state.webchat_cookies = None
    app.state.webchat_feed = feed_for(settings.redis_url)
    app.state.webchat_streams = StreamShutdown()
    app.state.console_sessions = store_for(settings.redis_url)
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ContinueTraces)
    # Every route reads through the body limit (413) and may meet a malformed request (400).
    every_route = documented(400, 413)
    app.include_router(health.router, responses=every_route)
    if settings.webchat == "local":
        for router in (webchat.router, webchat_stream.router):
            app.include_router(router, responses=every_route, dependencies=[Depends(only_loopback)])
    elif settings.webchat == "public":
        app.include_router(webchat.router, responses=every_route)
        app.include_router(webchat_stream.router, responses=every_route)
    app.include_router(webhooks.router, responses=every_route)
    admin.install(app, responses=every_route)
    app.include_router(admin_usage.router, responses=every_route)
    console.install(app)
    if settings.internal_port is not None:
        app.add_middleware(SplitListeners, internal_port=settings.internal_port)
    return app
