"""A tenant's own MCP servers, stored with their secrets sealed like bot credentials.

Functions take the unit of work first; they flush, never commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_core.config import McpServerConfig, check_mcp_server_name
from agent_core.crypto import CredentialBox
from agent_core.db.models import TenantMcpServer
from agent_core.errors import InvalidInput
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tools.mcp.spec import McpServerSpec, spec_from_config


@dataclass(frozen=True, slots=True)
class ServerListing:
    """What ``hubbub tenants mcp list`` shows: never a secret's value."""

    name: str
    transport: str
    target: str
    """The command line or the URL."""
    secret_names: tuple[str, ...]
    """Names of the environment variables and headers it carries (values hidden)."""
    timeout: float | None
    groups: bool


def add_server(
    db: Session, box: CredentialBox, *, tenant_id: str, name: str, config: McpServerConfig
) -> TenantMcpServer:
    """Store a tenant's server; ``env`` values and ``headers`` are sealed.

    Raises:
        InvalidInput: no such tenant, a bad name, or the tenant has a server of that name.
    """
    try:
        check_mcp_server_name(name)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    if TenancyRepository.from_session(db).get_tenant(tenant_id) is None:
        raise InvalidInput(f"no tenant {tenant_id!r}: create it first")
    if _get(db, tenant_id, name) is not None:
        raise InvalidInput(f"tenant {tenant_id!r} has an MCP server {name!r} already")
    secrets = {
        "env": {k: v.get_secret_value() for k, v in config.env.items()},
        "headers": {k: v.get_secret_value() for k, v in config.headers.items()},
    }
    row = TenantMcpServer(
        tenant_id=tenant_id,
        name=name,
        command=config.command,
        args=list(config.args),
        url=config.url,
        secrets=box.seal(secrets) if secrets["env"] or secrets["headers"] else None,
        options={"timeout": config.timeout, "groups": config.groups},
    )
    db.add(row)
    db.flush()
    return row


def remove_server(db: Session, *, tenant_id: str, name: str) -> bool:
    """Delete a tenant's server; ``False`` when there is none of that name."""
    row = _get(db, tenant_id, name)
    if row is None:
        return False
    db.delete(row)
    db.flush()
    return True


def list_servers(db: Session, box: CredentialBox, tenant_id: str) -> list[ServerListing]:
    """The tenant's servers, by name, secrets reduced to their names."""
    listings = []
    for row in _rows(db, tenant_id):
        config = _config(row, box)
        listings.append(
            ServerListing(
                name=row.name,
                transport="stdio" if row.command is not None else "http",
                target=" ".join([row.command, *row.args]) if row.command else str(row.url),
                secret_names=tuple(sorted([*config.env, *config.headers])),
                timeout=config.timeout,
                groups=config.groups,
            )
        )
    return listings


def server_transports(db: Session, tenant_id: str) -> list[tuple[str, str]]:
    """The tenant's servers as (name, ``stdio`` or ``http``): what the admin API shows.

    Neither target nor secret names: a URL or an argument may carry a token.
    """
    return [
        (row.name, "stdio" if row.command is not None else "http") for row in _rows(db, tenant_id)
    ]


def tenant_specs(db: Session, box: CredentialBox, tenant_id: str) -> list[McpServerSpec]:
    """The tenant's servers, secrets opened, as the pool reaches them."""
    return [
        spec_from_config(row.name, _config(row, box), owner=tenant_id)
        for row in _rows(db, tenant_id)
    ]


def _get(db: Session, tenant_id: str, name: str) -> TenantMcpServer | None:
    return db.scalar(
        select(TenantMcpServer).where(
            TenantMcpServer.tenant_id == tenant_id, TenantMcpServer.name == name
        )
    )


def _rows(db: Session, tenant_id: str) -> list[TenantMcpServer]:
    return list(
        db.scalars(
            select(TenantMcpServer)
            .where(TenantMcpServer.tenant_id == tenant_id)
            .order_by(TenantMcpServer.name)
        )
    )


def _config(row: TenantMcpServer, box: CredentialBox) -> McpServerConfig:
    secrets = box.open(row.secrets) if row.secrets else {}
    options = row.options or {}
    try:
        return McpServerConfig(
            command=row.command,
            args=list(row.args or []),
            env=secrets.get("env", {}),
            url=row.url,
            headers=secrets.get("headers", {}),
            timeout=options.get("timeout"),
            groups=bool(options.get("groups", True)),
        )
    except ValidationError as exc:  # a row edited by hand
        raise InvalidInput(f"stored MCP server {row.name!r} is malformed") from exc
