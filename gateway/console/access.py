"""Who is using the console: the session cookie, the key behind it, CSRF and scope checks.

The rules are the admin API's: a tenant key sees only its tenant (another tenant's id is
a 404, as if it did not exist), the operator key every tenant, and a read key may look
but not change anything (403). The cookie is ``HttpOnly``, ``SameSite=Strict``, limited
to ``/console``, expiring with the session, and ``Secure`` when the request came over
HTTPS or through a proxy that says it did (``X-Forwarded-Proto`` / ``Forwarded``).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

import redis
from fastapi import Depends, Request, Response

from agent_core.admin import keys
from agent_core.db.base import utcnow
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import Tenant
from gateway.console.sessions import ConsoleSession, SessionStore
from gateway.dependencies import get_runtime
from workers.runtime import Runtime

log = logging.getLogger(__name__)

BASE = "/console"
COOKIE_NAME = "hubbub_console"
SIGN_IN_COOKIE = "hubbub_console_sign_in"
"""The sign-in form's own CSRF token (double submit): nobody else can sign you in."""
SIGN_IN_COOKIE_SECONDS = 3600
SIGN_IN_TOKEN_BYTES = 24

T = TypeVar("T")


class SignInRequired(Exception):
    """No live session: the browser is sent to the sign-in page."""


class Refused(Exception):
    """A console request answered with ``status`` and a sentence on an error page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Viewer:
    """A signed-in browser and the key it speaks for (read afresh on every request)."""

    caller: keys.Caller
    session_id: str
    session: ConsoleSession

    @property
    def can_write(self) -> bool:
        """Whether the key may change things (admin scope)."""
        return self.caller.scope is keys.Scope.ADMIN

    @property
    def actor(self) -> str:
        """How the audit log names the viewer: the key's prefix, as for the API."""
        return self.caller.prefix


def sessions_of(request: Request) -> SessionStore:
    """The app's console session store."""
    store: SessionStore = request.app.state.console_sessions
    return store


def use_store(action: Callable[[], T]) -> T:
    """Run a session store call; Redis down is a 503 page, not a 500.

    Raises:
        Refused: the store cannot be reached.
    """
    try:
        return action()
    except redis.RedisError as exc:
        log.warning("console session store unavailable", extra={"error": type(exc).__name__})
        raise Refused(503, "the session store (Redis) is unavailable; retry shortly") from exc


def is_https(request: Request) -> bool:
    """Whether the browser reached us over HTTPS, directly or through a TLS proxy."""
    if request.url.scheme == "https":
        return True
    forwarded_proto = request.headers.get("x-forwarded-proto", "").split(",")[0]
    if forwarded_proto.strip().lower() == "https":
        return True
    first_hop = request.headers.get("forwarded", "").split(",")[0]
    return any(
        part.strip().lower() == "proto=https" for part in first_hop.split(";") if part.strip()
    )


def set_session_cookie(response: Response, request: Request, session_id: str, max_age: int) -> None:
    """Give the browser its session id."""
    response.set_cookie(
        COOKIE_NAME,
        session_id,
        max_age=max_age,
        path=BASE,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    """Make the browser forget its session id."""
    response.delete_cookie(
        COOKIE_NAME, path=BASE, httponly=True, samesite="strict", secure=is_https(request)
    )


def new_sign_in_token() -> str:
    """A fresh token for the sign-in form (and its cookie)."""
    return secrets.token_urlsafe(SIGN_IN_TOKEN_BYTES)


def set_sign_in_cookie(response: Response, request: Request, token: str) -> None:
    """Give the browser the sign-in form's token, for a short while."""
    response.set_cookie(
        SIGN_IN_COOKIE,
        token,
        max_age=SIGN_IN_COOKIE_SECONDS,
        path=BASE,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )


def sign_in_token_matches(request: Request, token: str) -> bool:
    """Whether the form's token is the one this browser's cookie holds."""
    expected = request.cookies.get(SIGN_IN_COOKIE, "")
    return bool(expected) and hmac.compare_digest(expected, token)


def current_viewer(request: Request, runtime: Annotated[Runtime, Depends(get_runtime)]) -> Viewer:
    """The signed-in viewer, with the key's scope and tenant as they are now.

    Raises:
        SignInRequired: no cookie, an unknown or expired session, or a revoked key (whose
            session is deleted on the way).
    """
    session_id = request.cookies.get(COOKIE_NAME)
    if not session_id:
        raise SignInRequired
    store = sessions_of(request)
    session = use_store(lambda: store.get(session_id))
    if session is None:
        raise SignInRequired
    with read_transaction(runtime.factory) as db:
        found = keys.caller_for_prefix(db, session.key_prefix)
    if found is None:
        use_store(lambda: store.delete(session_id))
        log.info("console session ended: its key was revoked", extra={"key": session.key_prefix})
        raise SignInRequired
    caller, last_used_at = found
    now = utcnow()
    if keys.is_stale(last_used_at, now):
        # Bookkeeping only, as for the API: a use lost in a database crash is harmless.
        with transaction(runtime.factory, durable=False) as db:
            keys.touch(db, caller.prefix, now)
    viewer = Viewer(caller=caller, session_id=session_id, session=session)
    request.state.console_viewer = viewer  # so that an error page still shows the menu
    return viewer


CurrentViewer = Annotated[Viewer, Depends(current_viewer)]


def check_csrf(viewer: Viewer, csrf: str) -> None:
    """Refuse a form without this session's CSRF token.

    Raises:
        Refused: 403, the token is missing or wrong.
    """
    if not hmac.compare_digest(viewer.session.csrf.encode(), csrf.encode()):
        raise Refused(403, "this form has expired or did not come from the console; reload it")


def check_write(viewer: Viewer, csrf: str) -> None:
    """Refuse a change without this session's CSRF token, or by a read key.

    Raises:
        Refused: 403, the token is missing or wrong, or the key is read-only.
    """
    check_csrf(viewer, csrf)
    if not viewer.can_write:
        raise Refused(403, "this key is read-only")


def reachable_tenant(viewer: Viewer, runtime: Runtime, tenant_id: str) -> Tenant:
    """The tenant, when the viewer's key reaches it.

    Raises:
        Refused: 404 for a tenant that does not exist or that the key does not reach.
    """
    if not viewer.caller.reaches(tenant_id):
        raise Refused(404, "no such tenant")
    with read_transaction(runtime.factory) as db:
        tenant = db.get(Tenant, tenant_id)
        if tenant is None:
            raise Refused(404, "no such tenant")
        db.expunge(tenant)
    return tenant
