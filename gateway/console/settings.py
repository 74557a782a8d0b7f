"""The console's settings page: a tenant's settings viewed, and edited by admin keys.

The form replaces the settings as a whole, like ``PUT …/settings``, through the same
:func:`~agent_core.admin.operations.update_settings` (validated, audited). Bad input is
shown back with its message in the form as it was sent, and changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from agent_core.admin import operations
from agent_core.busy import BUSY_MODES
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.models import Tenant
from agent_core.errors import InvalidInput
from agent_core.tenancy.settings import TRIGGER_MODES, TenantDefaults, check_busy_mode
from agent_core.tools.mcp.tenants import server_transports
from gateway.console.access import BASE, CurrentViewer, Refused, Viewer, check_write
from gateway.console.access import reachable_tenant as reached
from gateway.console.render import Csrf, RuntimeDep, TenantId, page, see
from workers.runtime import Runtime

router = APIRouter(prefix=BASE, include_in_schema=False)

MAX_TEXT = 20_000
"""Persona and instructions, as the API allows."""
MAX_LIST_CHARS = 100_000
"""An allow-list or tool list as typed (one entry a line or comma-separated)."""
MAX_ENTRIES = {"allow_users": 1000, "allow_chats": 1000, "tools": 200, "models": 100}
"""Entries per list, as the API allows."""
_SEPARATORS = re.compile(r"[\s,]+")

Text = Annotated[str, Form(max_length=MAX_TEXT)]
Short = Annotated[str, Form(max_length=200)]
ListText = Annotated[str, Form(max_length=MAX_LIST_CHARS)]


@dataclass(frozen=True)
class SettingsForm:
    """What the form sent, as typed (shown back as it was when it is refused)."""

    name: str
    persona: str
    instructions: str
    trigger_mode: str
    busy_mode: str
    allow_users: str
    allow_chats: str
    tools: str
    compression_threshold: str
    hygiene_threshold: str
    models: str
    default_model: str

    @classmethod
    def of(cls, described: dict[str, Any]) -> SettingsForm:
        """The form filled with stored settings (as ``describe_settings`` gives them)."""

        def text(key: str) -> str:
            value = described.get(key)
            if value is None:
                return ""
            return "\n".join(value) if isinstance(value, list) else str(value)

        return cls(**{name: text(name) for name in cls.__dataclass_fields__})

    def change(self) -> operations.TenantSettingsChange:
        """The settings the form asks for.

        Raises:
            InvalidInput: a mode, list or threshold that is not one.
        """
        trigger = self.trigger_mode or None
        if trigger is not None and trigger not in TRIGGER_MODES:
            raise InvalidInput(f"trigger mode must be one of {', '.join(TRIGGER_MODES)}")
        busy = self.busy_mode or None
        check_busy_mode(busy)
        return operations.TenantSettingsChange(
            name=self.name.strip(),
            persona=self.persona.strip() or None,
            stored=TenantDefaults(
                instructions=self.instructions.strip() or None,
                trigger_mode=trigger,
                busy_mode=busy,
                allow_users=_entries("allow_users", self.allow_users),
                allow_chats=_entries("allow_chats", self.allow_chats),
                tools=_entries("tools", self.tools),
                compression_threshold=_share("compression threshold", self.compression_threshold),
                hygiene_threshold=_share("hygiene threshold", self.hygiene_threshold),
                models=_entries("models", self.models),
                default_model=self.default_model.strip() or None,
            ),
        )


def _entries(field: str, text: str) -> tuple[str, ...] | None:
    entries = tuple(dict.fromkeys(e for e in _SEPARATORS.split(text) if e))
    if len(entries) > MAX_ENTRIES[field]:
        raise InvalidInput(f"{field} holds at most {MAX_ENTRIES[field]} entries")
    return entries or None


def _share(name: str, text: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a share of the window between 0 and 1 (e.g. 0.5), or empty "
            "for the deployment's"
        ) from None


def _settings_page(
    request: Request,
    viewer: Viewer,
    runtime: Runtime,
    tenant: Tenant,
    *,
    form: SettingsForm | None = None,
    error: str | None = None,
) -> HTMLResponse:
    with read_transaction(runtime.factory) as db:
        stored = db.get(Tenant, tenant.id)
        if stored is None:
            raise Refused(404, "no such tenant")
        current = SettingsForm.of(operations.describe_settings(stored))
        servers = server_transports(db, tenant.id)
    compression = runtime.settings.compression
    return page(
        request,
        "settings.html",
        viewer,
        400 if error else 200,
        tenant=tenant,
        section="settings",
        form=form or current,
        error=error,
        servers=servers,
        trigger_modes=TRIGGER_MODES,
        busy_modes=BUSY_MODES,
        deployment={
            "trigger_mode": runtime.settings.trigger_mode,
            "busy_mode": runtime.settings.busy_mode,
            "compression_threshold": compression.threshold,
            "hygiene_threshold": compression.hygiene_threshold,
            "models": ", ".join(runtime.settings.allowed_models),
            "default_model": runtime.settings.model or "none set",
        },
    )


@router.get("/t/{tenant}/settings")
def settings_page(
    request: Request, viewer: CurrentViewer, runtime: RuntimeDep, tenant: TenantId
) -> HTMLResponse:
    """The tenant's settings: a form for admin keys, read-only for read keys."""
    return _settings_page(request, viewer, runtime, reached(viewer, runtime, tenant))


@router.post("/t/{tenant}/settings")
def save_settings(
    request: Request,
    viewer: CurrentViewer,
    runtime: RuntimeDep,
    tenant: TenantId,
    csrf: Csrf = "",
    name: Short = "",
    persona: Text = "",
    instructions: Text = "",
    trigger_mode: Annotated[str, Form(max_length=16)] = "",
    busy_mode: Annotated[str, Form(max_length=16)] = "",
    allow_users: ListText = "",
    allow_chats: ListText = "",
    tools: ListText = "",
    compression_threshold: Annotated[str, Form(max_length=32)] = "",
    hygiene_threshold: Annotated[str, Form(max_length=32)] = "",
    models: ListText = "",
    default_model: Short = "",
) -> Response:
    """Replace the tenant's settings, as ``PUT …/settings`` does (audited)."""
    check_write(viewer, csrf)
    found = reached(viewer, runtime, tenant)
    form = SettingsForm(
        name,
        persona,
        instructions,
        trigger_mode,
        busy_mode,
        allow_users,
        allow_chats,
        tools,
        compression_threshold,
        hygiene_threshold,
        models,
        default_model,
    )
    try:
        change = form.change()
        with transaction(runtime.factory) as db:
            updated = operations.update_settings(
                db,
                tenant_id=tenant,
                change=change,
                deployment=runtime.settings.compression,
                offered_models=runtime.settings.allowed_models,
                actor=viewer.actor,
            )
    except InvalidInput as exc:
        return _settings_page(request, viewer, runtime, found, form=form, error=str(exc))
    if updated is None:
        raise Refused(404, "no such tenant")
    runtime.bots.forget(tenant)
    return see(f"/t/{tenant}/settings", "saved")
