"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from typing import Annotated, Any

import redis
from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from gateway.dependencies import get_runtime
from gateway.errors import documented
from workers.runtime import Runtime

router = APIRouter(tags=["service"])

BROKER_TIMEOUT_SECONDS = 2.0


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


def _check_database(runtime: Runtime) -> str | None:
    try:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return f"database unreachable: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None


def _check_broker(runtime: Runtime) -> str | None:
    url = runtime.settings.redis_url
    if url is None:
        return None
    client = redis.Redis.from_url(
        url,
        socket_timeout=BROKER_TIMEOUT_SECONDS,
        socket_connect_timeout=BROKER_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
    except Exception as exc:
        return f"broker unreachable: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        client.close()
    return None


@router.get("/readyz", responses=documented(503))
def readyz(runtime: Annotated[Runtime, Depends(get_runtime)]) -> JSONResponse:
    """Database and broker reachable: 200; otherwise 503 with the reasons."""
    reasons = [r for r in (_check_database(runtime), _check_broker(runtime)) if r]
    body: dict[str, Any] = {
        "status": "unavailable" if reasons else "ready",
        "database": runtime.engine.dialect.name,
        "broker": "redis" if runtime.settings.redis_url else "embedded",
    }
    if reasons:
        body["reasons"] = reasons
    return JSONResponse(body, status_code=503 if reasons else 200)


@router.get("/metrics")
def prometheus_metrics() -> Response:
    """Prometheus exposition of this process's metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
