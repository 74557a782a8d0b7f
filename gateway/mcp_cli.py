"""``hubbub tenants mcp``: a tenant's own MCP servers (stdio commands or HTTP URLs).

Environment values and headers are sealed with HUBBUB_SECRET_KEY and never shown. Stdio
servers run on the worker machines with the workers' rights: only operators add them.
"""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from agent_core.config import McpServerConfig, Settings
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.errors import InvalidInput
from agent_core.tools.mcp.tenants import add_server, list_servers, remove_server

app = typer.Typer(help="Manage a tenant's MCP servers (their tools become <name>__<tool>).")


def _factory(ctx: typer.Context) -> sessionmaker[Session]:
    settings: Settings = ctx.obj
    return make_session_factory(create_db_engine(settings.resolved_database_url))


def _box(ctx: typer.Context) -> CredentialBox:
    settings: Settings = ctx.obj
    secret = settings.secret_key.get_secret_value() if settings.secret_key else None
    return CredentialBox(load_or_create_key(secret, settings.home))


def _pairs(values: list[str] | None, separator: str, what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or []:
        key, found, rest = value.partition(separator)
        if not found or not key.strip():
            raise InvalidInput(f"{what} must look like NAME{separator}VALUE")
        pairs[key.strip()] = rest.strip() if separator == ":" else rest
    return pairs


def _refuse(message: str) -> typer.Exit:
    typer.secho(message, fg=typer.colors.RED, err=True)
    return typer.Exit(2)


@app.command("add")
def mcp_add(
    ctx: typer.Context,
    tenant: Annotated[str, typer.Argument(help="The tenant.")],
    name: Annotated[str, typer.Argument(help="Server name, the prefix of its tools.")],
    command: Annotated[str | None, typer.Option(help="Executable of a stdio server.")] = None,
    arg: Annotated[list[str] | None, typer.Option(help="Argument of the command (repeat).")] = None,
    env: Annotated[
        list[str] | None, typer.Option(help="NAME=VALUE for a stdio server (repeat).")
    ] = None,
    url: Annotated[str | None, typer.Option(help="Streamable HTTP endpoint.")] = None,
    header: Annotated[
        list[str] | None, typer.Option(help="'Name: value' for HTTP (repeat).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per tool call.")] = None,
    groups: Annotated[bool, typer.Option(help="Offer its tools in group chats.")] = True,
) -> None:
    """Add an MCP server to a tenant; its bots offer the tools from their next turn."""
    try:
        config = McpServerConfig(
            command=command,
            args=arg or [],
            env=_pairs(env, "=", "--env"),
            url=url,
            headers=_pairs(header, ":", "--header"),
            timeout=timeout,
            groups=groups,
        )
        with transaction(_factory(ctx)) as db:
            add_server(db, _box(ctx), tenant_id=tenant, name=name, config=config)
    except InvalidInput as exc:
        raise _refuse(str(exc)) from exc
    except ValidationError as exc:
        raise _refuse("; ".join(str(e["msg"]) for e in exc.errors())) from exc
    typer.echo(f"MCP server {name} added to tenant {tenant}; its tools are {name}__<tool>.")


@app.command("list")
def mcp_list(ctx: typer.Context, tenant: str) -> None:
    """A tenant's MCP servers (secret values are never shown)."""
    with transaction(_factory(ctx)) as db:
        listings = list_servers(db, _box(ctx), tenant)
    if not listings:
        typer.echo("No MCP servers.")
    for s in listings:
        secrets = f"  secrets: {', '.join(s.secret_names)}" if s.secret_names else ""
        extra = f"  timeout={s.timeout:g}s" if s.timeout else ""
        scope = "" if s.groups else "  private chats only"
        typer.echo(f"{s.name}  {s.transport}  {s.target}{extra}{scope}{secrets}")


@app.command("remove")
def mcp_remove(ctx: typer.Context, tenant: str, name: str) -> None:
    """Remove a tenant's MCP server."""
    with transaction(_factory(ctx)) as db:
        removed = remove_server(db, tenant_id=tenant, name=name)
    if not removed:
        typer.secho("No such MCP server.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo("MCP server removed.")
