"""``hubbub tenants`` and ``hubbub bots``: manage tenants and database-configured bots.

Bots configured here are started by the gateway on its next start, next to the bot
configured from the environment; their credentials are sealed with HUBBUB_SECRET_KEY.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer
from sqlalchemy.orm import Session, sessionmaker

from agent_core.admin import audit, operations
from agent_core.busy import BUSY_MODES
from agent_core.config import Settings
from agent_core.crypto import CredentialBox, load_or_create_key
from agent_core.db.engine import (
    create_db_engine,
    make_session_factory,
    read_transaction,
    transaction,
)
from agent_core.db.models import Tenant
from agent_core.errors import InvalidInput
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tenancy.service import add_bot, add_tenant, remove_bot, set_busy_mode
from agent_core.tenancy.settings import TenantDefaults
from gateway import mcp_cli

tenants = typer.Typer(help="Manage tenants (each with its own bots and sessions).")
bots = typer.Typer(help="Manage bots whose credentials are stored in the database.")
tenants.add_typer(mcp_cli.app, name="mcp")


def _factory(ctx: typer.Context) -> sessionmaker[Session]:
    settings: Settings = ctx.obj
    return make_session_factory(create_db_engine(settings.resolved_database_url))


def _box(ctx: typer.Context) -> CredentialBox:
    settings: Settings = ctx.obj
    secret = settings.secret_key.get_secret_value() if settings.secret_key else None
    return CredentialBox(load_or_create_key(secret, settings.home))


def _refuse(exc: InvalidInput) -> typer.Exit:
    typer.secho(str(exc), fg=typer.colors.RED, err=True)
    return typer.Exit(2)


@tenants.command("add")
def tenants_add(
    ctx: typer.Context,
    tenant_id: str,
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    persona: Annotated[str | None, typer.Option(help="Replaces the default identity.")] = None,
) -> None:
    """Create a tenant."""
    try:
        with transaction(_factory(ctx)) as db:
            add_tenant(db, tenant_id, name=name, persona=persona)
    except InvalidInput as exc:
        raise _refuse(exc) from exc
    typer.echo(f"Tenant {tenant_id} created.")


@tenants.command("list")
def tenants_list(ctx: typer.Context) -> None:
    """Every tenant: id, name, how many bots it owns, when it was created."""
    with read_transaction(_factory(ctx)) as db:
        rows = TenancyRepository.from_session(db).list_tenants_with_bot_counts()
    for tenant, count in rows:
        created = tenant.created_at.strftime("%Y-%m-%d %H:%M UTC")
        bots_word = "bot" if count == 1 else "bots"
        typer.echo(f"{tenant.id}  {tenant.name!r}  {count} {bots_word}  created {created}")


@tenants.command("models")
def tenants_models(
    ctx: typer.Context,
    tenant_id: str,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="A model its sessions may use (repeat); from HUBBUB_MODELS."),
    ] = None,
    default: Annotated[str | None, typer.Option(help="The model a session starts on.")] = None,
    clear: Annotated[bool, typer.Option(help="Back to the deployment's list and default.")] = False,
) -> None:
    """Show, set or clear the models a tenant's sessions may use (/model) and their default.

    Setting replaces both: what is not given is unset.
    """
    settings: Settings = ctx.obj
    try:
        with transaction(_factory(ctx)) as db:
            tenant = db.get(Tenant, tenant_id)
            if tenant is None:
                typer.secho("No such tenant.", fg=typer.colors.RED, err=True)
                raise typer.Exit(1)
            stored = TenantDefaults.from_json(tenant.settings)
            if model or default or clear:
                models = tuple(model) if model else None
                stored = replace(stored, models=models, default_model=default)
                change = operations.TenantSettingsChange(tenant.name, tenant.persona, stored)
                operations.update_settings(
                    db,
                    tenant_id=tenant_id,
                    change=change,
                    deployment=settings.compression,
                    offered_models=settings.allowed_models,
                    actor=audit.CLI_ACTOR,
                )
    except InvalidInput as exc:
        raise _refuse(exc) from exc
    offered = ", ".join(settings.allowed_models) or "none"
    main = settings.model or "unset"
    typer.echo(f"Models: {', '.join(stored.models) if stored.models else f'all ({offered})'}")
    typer.echo(f"Default: {stored.default_model or f'HUBBUB_MODEL ({main})'}")


@bots.command("add")
def bots_add(
    ctx: typer.Context,
    platform: Annotated[str, typer.Argument(help="telegram, discord or slack")],
    name: Annotated[str, typer.Argument(help="The bot id used in webhook URLs.")],
    tenant: Annotated[str, typer.Option(help="Owning tenant.")] = "default",
    token: Annotated[
        str,
        typer.Option(
            envvar="HUBBUB_NEW_BOT_TOKEN", help="Platform token.", prompt=True, hide_input=True
        ),
    ] = "",
    webhook_secret: Annotated[str | None, typer.Option(help="Telegram webhook secret.")] = None,
    signing_secret: Annotated[str | None, typer.Option(help="Slack signing secret.")] = None,
    app_token: Annotated[str | None, typer.Option(help="Slack app token (Socket Mode).")] = None,
    api_base: Annotated[str | None, typer.Option(help="Platform API base URL.")] = None,
    mode: Annotated[str | None, typer.Option(help="Telegram: auto, webhook or polling.")] = None,
    trigger_mode: Annotated[
        str | None, typer.Option(help="mention, all or commands (default: the tenant's).")
    ] = None,
    answer_bots: Annotated[bool, typer.Option(help="Answer other bots.")] = False,
    busy_mode: Annotated[
        str | None,
        typer.Option(
            help=f"{', '.join(BUSY_MODES)}: messages during a running turn (default: the tenant's)."
        ),
    ] = None,
    allow_user: Annotated[list[str] | None, typer.Option(help="Allowed user id (repeat).")] = None,
    allow_chat: Annotated[list[str] | None, typer.Option(help="Allowed chat id (repeat).")] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option(help="Tool name or pattern it offers (repeat); default: HUBBUB_TOOLS."),
    ] = None,
) -> None:
    """Add a bot; restart the gateway to start it."""
    secrets = {
        "token": token,
        "webhook_secret": webhook_secret or "",
        "signing_secret": signing_secret or "",
        "app_token": app_token or "",
    }
    options = {
        "api_base": api_base,
        "mode": mode,
        "allow_users": allow_user or [],
        "allow_chats": allow_chat or [],
        "tools": tool or [],
    }
    try:
        with transaction(_factory(ctx)) as db:
            bot = add_bot(
                db,
                _box(ctx),
                tenant_id=tenant,
                platform=platform,
                name=name,
                secrets=secrets,
                options=options,
                trigger_mode=trigger_mode,
                answer_bots=answer_bots,
                busy_mode=busy_mode,
            )
            bot_id = bot.id
    except InvalidInput as exc:
        raise _refuse(exc) from exc
    path = name if tenant == "default" else f"{tenant}.{name}"
    typer.echo(f"Bot #{bot_id} added; its webhook path is /webhooks/{platform}/{path}.")


@bots.command("list")
def bots_list(ctx: typer.Context) -> None:
    """Every bot (credentials are never shown)."""
    with transaction(_factory(ctx)) as db:
        for bot in TenancyRepository.from_session(db).list_bots():
            source = "database" if bot.credentials else "environment"
            typer.echo(
                f"#{bot.id} {bot.tenant_id}/{bot.platform}/{bot.name}  "
                f"trigger={bot.trigger_mode or 'tenant default'}  "
                f"busy={bot.busy_mode or 'tenant default'}  credentials from {source}"
            )


@bots.command("busy-mode")
def bots_busy_mode(
    ctx: typer.Context,
    platform: str,
    name: str,
    mode: Annotated[str, typer.Argument(help=f"{', '.join(BUSY_MODES)} or inherit.")],
    tenant: Annotated[str, typer.Option(help="Owning tenant.")] = "default",
) -> None:
    """Set what messages arriving during a running turn do (read by the next turn)."""
    try:
        with transaction(_factory(ctx)) as db:
            bot = set_busy_mode(
                db,
                tenant_id=tenant,
                platform=platform,
                name=name,
                mode=None if mode == "inherit" else mode,
            )
    except InvalidInput as exc:
        raise _refuse(exc) from exc
    if bot is None:
        typer.secho("No such bot.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo(f"Bot #{bot.id} busy mode: {bot.busy_mode or 'tenant default'}.")


@bots.command("remove")
def bots_remove(
    ctx: typer.Context,
    platform: str,
    name: str,
    tenant: Annotated[str, typer.Option(help="Owning tenant.")] = "default",
) -> None:
    """Delete a bot with its sessions and messages."""
    with transaction(_factory(ctx)) as db:
        removed = remove_bot(db, tenant_id=tenant, platform=platform, name=name)
    if not removed:
        typer.secho("No such bot.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo("Bot removed.")
