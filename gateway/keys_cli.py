"""``hubbub keys``: create, list and revoke admin API keys.

``create`` prints the new key alone on the last line of its output: it is shown once and
stored only as a hash, so a script can capture it with ``tail -n 1``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session, sessionmaker

from agent_core.admin import audit, keys
from agent_core.config import Settings
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.errors import InvalidInput

app = typer.Typer(help="Manage admin API keys (shown once, stored hashed).")


def _factory(ctx: typer.Context) -> sessionmaker[Session]:
    settings: Settings = ctx.obj
    return make_session_factory(create_db_engine(settings.resolved_database_url))


@app.command("create")
def create(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="The tenant the key is limited to.")] = None,
    scope: Annotated[str, typer.Option(help="admin (read and write) or read.")] = "admin",
    operator: Annotated[bool, typer.Option(help="A key for every tenant.")] = False,
) -> None:
    """Create a key and print it once."""
    if operator == (tenant is not None):
        typer.secho("Give either --tenant T or --operator.", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    try:
        with transaction(_factory(ctx)) as db:
            created = keys.create(db, tenant_id=tenant, scope=scope)
            audit.record(
                db,
                tenant_id=tenant,
                actor=audit.CLI_ACTOR,
                action="key.create",
                target=created.key.prefix,
                after=keys.describe(created.key),
            )
    except InvalidInput as exc:
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    reach = "every tenant" if tenant is None else f"tenant {tenant}"
    typer.echo(f"Key {created.key.prefix}… ({scope}, {reach}). It is shown only once:")
    typer.echo(created.secret)


@app.command("list")
def list_keys(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
) -> None:
    """Every key (never the secret)."""
    with transaction(_factory(ctx)) as db:
        for key in keys.KeyRepository.from_session(db).list(tenant):
            used = key.last_used_at.isoformat(timespec="minutes") if key.last_used_at else "never"
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            typer.echo(
                f"{key.prefix}  {key.tenant_id or '(operator)'}  {key.scope}  "
                f"last used {used}  {state}"
            )


@app.command("revoke")
def revoke(ctx: typer.Context, prefix: str) -> None:
    """Revoke a key by its prefix (``hbk_`` and 8 characters)."""
    with transaction(_factory(ctx)) as db:
        key = keys.KeyRepository.from_session(db).get_by_prefix(prefix)
        before = keys.describe(key) if key is not None else None
        revoked = keys.revoke(db, prefix)
        if revoked is not None:
            audit.record(
                db,
                tenant_id=revoked.tenant_id,
                actor=audit.CLI_ACTOR,
                action="key.revoke",
                target=prefix,
                before=before,
                after=keys.describe(revoked),
            )
    if revoked is None:
        typer.secho("No such key.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo(f"Key {prefix} revoked.")
