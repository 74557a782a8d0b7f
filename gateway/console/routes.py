"""The console's pages: sign-in, tenants and bots, sessions, compactions, keys, audit.

(Usage and budgets are in :mod:`gateway.console.usage`, settings in
:mod:`gateway.console.settings`.)

Plain HTML forms and redirects (post, then redirect, then get); no script. Reads and writes
go through the admin API's own functions and access rules, so the console can show or do
nothing the same key could not do over the API. Endpoints are plain functions (FastAPI
runs them in its thread pool): the database calls are blocking.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, FastAPI, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from agent_core.admin import audit, keys, operations
from agent_core.admin.repository import AdminRepository
from agent_core.compaction.repository import CompactionRepository
from agent_core.db.engine import read_transaction, transaction
from agent_core.errors import InvalidInput
from gateway.console import settings, usage, views
from gateway.console.access import (
    BASE,
    COOKIE_NAME,
    CurrentViewer,
    Refused,
    SignInRequired,
    Viewer,
    check_csrf,
    check_write,
    clear_session_cookie,
    new_sign_in_token,
    reachable_tenant,
    sessions_of,
    set_session_cookie,
    set_sign_in_cookie,
    sign_in_token_matches,
    use_store,
)
from gateway.console.render import Csrf, RuntimeDep, TenantId, page, see
from gateway.console.sessions import new_session
from gateway.routes.admin import (
    DEFAULT_LIMIT,
    AuditOut,
    SessionOut,
    bot_out,
    compaction_out,
    session_fields,
    session_gauge,
)
from workers.runtime import Runtime

log = logging.getLogger(__name__)

router = APIRouter(prefix=BASE, include_in_schema=False)

STYLESHEET = "console.css"
SessionId = Annotated[str, Path(max_length=32)]


def install(app: FastAPI) -> None:
    """Mount the console on ``app`` with its answers to refusals (pages, not JSON)."""

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, _: SignInRequired) -> Response:
        response = see("/sign-in")
        clear_session_cookie(response, request)
        return response

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> Response:
        viewer = getattr(request.state, "console_viewer", None)
        return page(request, "error.html", viewer, exc.status, message=str(exc))

    app.include_router(router)
    app.include_router(usage.router)
    app.include_router(settings.router)


# --- static, sign-in, sign-out --------------------------------------------------------------


@router.get("/static/console.css")
def stylesheet() -> Response:
    """The console's only stylesheet."""
    css = resources.files("gateway").joinpath("static", STYLESHEET).read_text()
    return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@router.get("/sign-in")
def sign_inpage(request: Request) -> HTMLResponse:
    """The form that takes an API key."""
    return _sign_in_form(request, 200, None)


def _sign_in_form(request: Request, status: int, error: str | None) -> HTMLResponse:
    token = new_sign_in_token()
    form = page(request, "sign_in.html", None, status, error=error, token=token)
    set_sign_in_cookie(form, request, token)
    return form


@router.post("/sign-in")
def sign_in(
    request: Request,
    runtime: RuntimeDep,
    key: Annotated[str, Form(max_length=256)] = "",
    token: Csrf = "",
) -> Response:
    """Check the key; a good one starts a session (a fresh id) and opens the console."""
    if not sign_in_token_matches(request, token):
        return _sign_in_form(request, 403, "The sign-in form expired; enter the key again.")
    with transaction(runtime.factory, durable=False) as db:
        caller = keys.verify(db, key.strip())
    if caller is None:
        log.warning("console sign-in refused: unknown or revoked key")
        return _sign_in_form(request, 401, "Unknown or revoked API key.")
    ttl = runtime.settings.console_session_hours * 3600
    store = sessions_of(request)
    previous = request.cookies.get(COOKIE_NAME)
    if previous:
        use_store(lambda: store.delete(previous))
    session_id, session = new_session(caller.prefix, ttl)
    use_store(lambda: store.put(session_id, session, ttl))
    log.info("console sign-in", extra={"key": caller.prefix, "scope": str(caller.scope)})
    response = see("/tenants" if caller.is_operator else f"/t/{caller.tenant_id}/bots")
    set_session_cookie(response, request, session_id, ttl)
    return response


@router.post("/sign-out")
def sign_out(request: Request, viewer: CurrentViewer, csrf: Csrf = "") -> Response:
    """End the session on the server and in the browser."""
    check_csrf(viewer, csrf)
    use_store(lambda: sessions_of(request).delete(viewer.session_id))
    log.info("console sign-out", extra={"key": viewer.caller.prefix})
    response = see("/sign-in")
    clear_session_cookie(response, request)
    return response


# --- tenants and bots -------------------------------------------------------------------------


@router.get("")
def home(viewer: CurrentViewer) -> Response:
    """The operator's tenant list, or a tenant key's own bots."""
    if viewer.caller.is_operator:
        return see("/tenants")
    return see(f"/t/{viewer.caller.tenant_id}/bots")


@router.get("/tenants")
def tenantspage(request: Request, viewer: CurrentViewer, runtime: RuntimeDep) -> HTMLResponse:
    """The tenants the key reaches, with their bots' status."""
    with read_transaction(runtime.factory) as db:
        repo = AdminRepository.from_session(db)
        rows = []
        for tenant in repo.tenants(viewer.caller.tenant_id):
            bots = repo.bots(tenant.id)
            activity = repo.bot_activity(bots)
            statuses = [str(activity[b.id].status) for b in bots]
            rows.append({"tenant": tenant, "bots": len(bots), "statuses": statuses})
    return page(request, "tenants.html", viewer, rows=rows)


@router.get("/t/{tenant}/bots")
def botspage(
    request: Request, viewer: CurrentViewer, runtime: RuntimeDep, tenant: TenantId
) -> HTMLResponse:
    """The tenant's bots: platform, options, and what their stored traffic shows."""
    found = reachable_tenant(viewer, runtime, tenant)
    with read_transaction(runtime.factory) as db:
        repo = AdminRepository.from_session(db)
        bots = repo.bots(tenant)
        activity = repo.bot_activity(bots)
        rows = [{"bot": bot_out(b), "activity": activity[b.id]} for b in bots]
    return page(request, "bots.html", viewer, tenant=found, section="bots", rows=rows)


# --- sessions and compactions -----------------------------------------------------------------


@router.get("/t/{tenant}/sessions")
def sessionspage(
    request: Request,
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    platform: Annotated[str | None, Query(max_length=32)] = None,
    chat: Annotated[str | None, Query(max_length=128)] = None,
) -> HTMLResponse:
    """The tenant's sessions, most recently active first, each with its context gauge."""
    found = reachable_tenant(viewer, runtime, tenant)
    with read_transaction(runtime.factory) as db:
        listed = AdminRepository.from_session(db).sessions(
            tenant, platform=platform or None, chat=chat or None, limit=DEFAULT_LIMIT
        )
        rows = [
            {
                "session": SessionOut(**session_fields(s)),
                "gauge": views.gauge_view(session_gauge(runtime, db, s)),
            }
            for s in listed
        ]
    return page(
        request,
        "sessions.html",
        viewer,
        tenant=found,
        section="sessions",
        rows=rows,
        platform=platform or "",
        chat=chat or "",
    )


@router.get("/t/{tenant}/sessions/{session_id}")
def sessionpage(
    request: Request,
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    session_id: SessionId,
) -> HTMLResponse:
    """One session: its gauge and its compaction timeline, newest first, with restore."""
    found = reachable_tenant(viewer, runtime, tenant)
    with read_transaction(runtime.factory) as db:
        s = AdminRepository.from_session(db).session_of(tenant, session_id)
        if s is None:
            raise Refused(404, "no such session")
        repo = CompactionRepository.from_session(db)
        compactions = repo.list_for_session(session_id)
        in_effect = repo.latest_in_effect(session_id)
        context = {
            "session": SessionOut(**session_fields(s)),
            "gauge": views.gauge_view(session_gauge(runtime, db, s)),
            "timeline": [
                {
                    "compaction": compaction_out(c),
                    "fallback_used": c.fallback_used,
                    "summary_model": c.summary_model,
                    "model_fallback_used": c.model_fallback_used,
                }
                for c in reversed(compactions)
            ],
            "restorable": in_effect.id if in_effect is not None else None,
        }
    return page(request, "session.html", viewer, 200, tenant=found, section="sessions", **context)


@router.post("/t/{tenant}/sessions/{session_id}/restore")
def restore(
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    session_id: SessionId,
    csrf: Csrf = "",
) -> Response:
    """Undo the session's newest compaction, exactly as the API's restore does (audited)."""
    check_write(viewer, csrf)
    reachable_tenant(viewer, runtime, tenant)
    with transaction(runtime.factory) as db:
        done = operations.restore_compaction(
            db, tenant_id=tenant, session_id=session_id, actor=viewer.actor
        )
    if done is None:
        raise Refused(404, "no such session")
    notice = "restored" if done.compaction_id is not None else "nothing"
    return see(f"/t/{tenant}/sessions/{session_id}", notice)


# --- keys and audit ---------------------------------------------------------------------------


def _keyspage(
    request: Request,
    viewer: Viewer,
    runtime: Runtime,
    tenant: str,
    *,
    created: keys.CreatedKey | None = None,
    status: int = 200,
) -> HTMLResponse:
    found = reachable_tenant(viewer, runtime, tenant)
    with read_transaction(runtime.factory) as db:
        listed = [keys.describe(k) for k in keys.KeyRepository.from_session(db).list(tenant)]
    return page(
        request,
        "keys.html",
        viewer,
        status,
        tenant=found,
        section="keys",
        keys=listed,
        created=created,
        scopes=[s.value for s in keys.Scope],
    )


@router.get("/t/{tenant}/keys")
def keyspage(
    request: Request, viewer: CurrentViewer, runtime: RuntimeDep, tenant: TenantId
) -> HTMLResponse:
    """The tenant's keys: prefix, scope, last use, revocation."""
    return _keyspage(request, viewer, runtime, tenant)


@router.post("/t/{tenant}/keys")
def create_key(
    request: Request,
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    csrf: Csrf = "",
    scope: Annotated[str, Form(max_length=16)] = "",
) -> HTMLResponse:
    """A new key for the tenant, shown on this answer only (never stored, never cached)."""
    check_write(viewer, csrf)
    reachable_tenant(viewer, runtime, tenant)
    try:
        with transaction(runtime.factory) as db:
            created = operations.create_key(db, tenant_id=tenant, scope=scope, actor=viewer.actor)
    except InvalidInput as exc:
        raise Refused(400, str(exc)) from exc
    return _keyspage(request, viewer, runtime, tenant, created=created, status=201)


@router.post("/t/{tenant}/keys/{prefix}/revoke")
def revoke_key(
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    prefix: Annotated[str, Path(max_length=16)],
    csrf: Csrf = "",
) -> Response:
    """Revoke one of the tenant's keys (a console session on it ends with it)."""
    check_write(viewer, csrf)
    reachable_tenant(viewer, runtime, tenant)
    with transaction(runtime.factory) as db:
        key = operations.revoke_key(db, tenant_id=tenant, prefix=prefix, actor=viewer.actor)
    if key is None:
        raise Refused(404, "no such key")
    return see(f"/t/{tenant}/keys", "revoked")


@router.get("/t/{tenant}/audit")
def auditpage(
    request: Request, viewer: CurrentViewer, runtime: RuntimeDep, tenant: TenantId
) -> HTMLResponse:
    """The tenant's audited changes, newest first."""
    found = reachable_tenant(viewer, runtime, tenant)
    with read_transaction(runtime.factory) as db:
        events = [
            AuditOut.model_validate(e, from_attributes=True)
            for e in audit.list_for_tenant(db, tenant, limit=DEFAULT_LIMIT)
        ]
    return page(request, "audit.html", viewer, tenant=found, section="audit", events=events)
