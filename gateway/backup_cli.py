"""``hubbub backup PATH`` and ``hubbub restore PATH``: the embedded SQLite database.

Postgres deployments use Postgres' own tools (pg_dump, base backups and WAL archiving):
see the README's "Backup and restore".
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent_core.config import Settings
from agent_core.db import backup as backups
from agent_core.db.migrations import head_revision
from agent_core.errors import InvalidInput

Target = Annotated[Path, typer.Argument(help="The backup file.")]
BackupForce = Annotated[bool, typer.Option("--force", help="Replace PATH if it exists.")]
RestoreForce = Annotated[
    bool, typer.Option("--force", help="Restore even into a running gateway's database.")
]


def _fail(message: str, code: int) -> typer.Exit:
    typer.secho(message, fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def backup(settings: Settings, path: Path, *, force: bool) -> None:
    """Copy the embedded database to ``path``: consistent, even while `hubbub up` runs.

    Raises:
        typer.Exit: 2 when there is nothing to back up or ``path`` is taken.
    """
    try:
        database = backups.sqlite_path(settings.resolved_database_url)
        made = backups.backup(database, path, overwrite=force)
    except InvalidInput as exc:
        raise _fail(str(exc), 2) from exc
    typer.echo(
        f"Backed up {database} to {made.path} ({made.size_bytes} bytes, schema {made.revision})."
    )


def restore(settings: Settings, path: Path, *, force: bool) -> None:
    """Replace the embedded database with the backup ``path`` (stop the gateway first).

    Raises:
        typer.Exit: 2 when ``path`` is not a usable backup, 1 while a gateway runs.
    """
    try:
        database = backups.sqlite_path(settings.resolved_database_url)
        restored = backups.restore(path, database, force=force)
    except InvalidInput as exc:
        raise _fail(str(exc), 2) from exc
    except backups.DatabaseInUse as exc:
        raise _fail(str(exc), 1) from exc
    typer.echo(f"Restored {path} into {database} (schema {restored.revision}).")
    if not restored.current:
        typer.echo(
            f"The backup's schema is older than this Hubbub's ({head_revision()}): "
            "`hubbub up` migrates it on start (or run `hubbub migrate`)."
        )
    if force:
        typer.echo("Restart the gateway so nothing it kept in memory predates the restore.")
