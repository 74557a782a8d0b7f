"""Turn errors into HTTP answers in one place: a 4xx with a clear message, never a 500."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from adapters.base import RETRY_LATER_SECONDS, WebhookVerificationError
from agent_core.errors import InvalidInput, MessageTooLong, UnknownConversation

log = logging.getLogger(__name__)

"""What a client is told to wait while the database is unreachable."""
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeout)
"""The database cannot be reached (down, restarting, pool exhausted): retrying later helps."""


class ErrorBody(BaseModel):
    """Every error answer: what went wrong, in a sentence."""

    error: str = Field(description="what was wrong with the request, or what failed")


_WHY = {
    400: "Bad input: invalid JSON, empty text, a body the route cannot read.",
    401: "The webhook signature is missing, stale or wrong; nothing stored.",
    403: "The webhook secret token is missing or wrong; nothing stored.",
    404: "No such conversation or bot.",
    413: "The body is larger than HUBBUB_MAX_BODY_BYTES, or the message longer than "
    "HUBBUB_MAX_MESSAGE_CHARS; nothing stored.",
    422: "A parameter or field has the wrong form.",
    503: "Temporarily unable; retry later.",
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that can answer with these error codes."""
    return {
        code: {"model": ErrorBody, "description": _WHY.get(code, HTTPStatus(code).phrase)}
        for code in codes
    }


def _describe(exc: RequestValidationError) -> tuple[int, str]:
    problems: list[str] = []
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            return 400, "request body is not valid JSON"
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        problems.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
    return 422, "; ".join(problems) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, message = _describe(exc)
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(UnknownConversation)
    async def _unknown(_: Request, exc: UnknownConversation) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        status = 413 if isinstance(exc, MessageTooLong) else 400
        return JSONResponse({"error": str(exc)}, status_code=status)

    @app.exception_handler(WebhookVerificationError)
    async def _unverified(_: Request, exc: WebhookVerificationError) -> JSONResponse:
        log.warning("webhook verification failed", extra={"reason": str(exc)})
        return JSONResponse({"error": str(exc)}, status_code=exc.status_code)

    async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        # Nothing was stored; platforms and the page retry on a 503.
        log.warning(
            "database unavailable",
            extra={"path": request.url.path, "error": type(exc).__name__},
        )
        return JSONResponse(
            {"error": "the database is unavailable; nothing was stored, retry shortly"},
            status_code=503,
            headers={"Retry-After": str(RETRY_LATER_SECONDS)},
        )

    for error in DATABASE_UNAVAILABLE:
        app.add_exception_handler(error, _database_unavailable)
