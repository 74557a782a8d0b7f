"""How the console answers: Jinja2 pages with strict headers, and redirects with a notice."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import Depends, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape

from agent_core.usage import Unit
from agent_core.usage.budgets import format_amount
from gateway.console import views
from gateway.console.access import BASE, Viewer
from gateway.dependencies import get_runtime
from workers.runtime import Runtime

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Every page: no scripts at all, not framed, never cached (a new key is on one)."""
NOTICES = {
    "restored": "The newest compaction was undone: its messages are active again.",
    "nothing": "There was no compaction to undo.",
    "revoked": "The key is revoked; its sessions and requests are refused from now on.",
    "saved": "The settings are saved: the tenant's next turns use them.",
}
"""The sentences a redirect may ask a page to show (never text from the query)."""

TenantId = Annotated[str, Path(max_length=64)]
Csrf = Annotated[str, Form(max_length=256)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

_templates = Jinja2Templates(
    env=Environment(
        loader=PackageLoader("gateway", "templates/console"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
)
_templates.env.filters["when"] = views.when
_templates.env.filters["number"] = views.number
_templates.env.filters["usd"] = partial(format_amount, Unit.USD)


def page(
    request: Request,
    template: str,
    viewer: Viewer | None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered for ``viewer``, with a notice the query names, if any."""
    notice = NOTICES.get(request.query_params.get("notice", ""))
    response = _templates.TemplateResponse(
        request,
        template,
        {"viewer": viewer, "base": BASE, "notice": notice, **context},
        status_code=status,
    )
    response.headers.update(SECURITY_HEADERS)
    return response


def see(path: str, notice: str | None = None) -> RedirectResponse:
    """A redirect to a console page (after a form: the browser then gets it)."""
    target = f"{BASE}{path}" + (f"?notice={notice}" if notice else "")
    return RedirectResponse(target, status_code=303)
