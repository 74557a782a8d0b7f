"""The ``hubbub`` command: ``up``, ``gateway``, ``worker``, ``migrate``, ``backup``, ``restore``."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from importlib.metadata import version as package_version
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
import uvicorn
from pydantic import ValidationError

from agent_core.config import Settings, load_settings
from agent_core.db.migrations import upgrade_to_head
from agent_core.logs import configure_logging
from gateway import admin_cli, backup_cli, keys_cli, sessions_cli, usage_cli

if TYPE_CHECKING:
    from gateway.routes.webchat_stream import StreamShutdown
    from gateway.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)

app = typer.Typer(
    help="Hubbub: one LLM agent behind your Telegram, Discord, Slack and web chats.",
    no_args_is_help=True,
    add_completion=False,
)

Host = Annotated[str | None, typer.Option(help="Interface to listen on (HUBBUB_HOST).")]
Port = Annotated[int | None, typer.Option(help="Port to listen on (HUBBUB_PORT).")]


def _settings(**overrides: object) -> Settings:
    try:
        settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except (ValidationError, FileNotFoundError) as exc:
        typer.secho(f"Invalid configuration:\n{exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    configure_logging(settings.log_level, json_lines=settings.log_json)
    return settings


def _listen(settings: Settings) -> list[socket.socket]:
    """The gateway's listening sockets, bound before anything starts.

    Raises:
        typer.Exit: a port is taken (one line says so) or an address is unusable.
    """
    from gateway.listeners import CannotListen, bind_listeners

    try:
        return bind_listeners(settings)
    except CannotListen as exc:
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that says where to chat once it is serving, not before."""

    def __init__(self, config: uvicorn.Config, settings: Settings, streams: StreamShutdown) -> None:
        super().__init__(config)
        self.settings = settings
        self.streams = streams

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Open event streams never finish on their own: end them before uvicorn waits.
        self.streams.close()
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.started:
            return
        settings = self.settings
        shown = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = f"http://{shown}:{settings.port}/"
        if settings.webchat == "off":
            typer.echo(f"Hubbub is up at {url}", err=True)
        else:
            typer.echo(f"Hubbub is up at {url} — open it to chat.", err=True)
        if settings.internal_port is not None:
            typer.echo(
                f"Metrics and API docs: http://{settings.internal_host}:{settings.internal_port}/",
                err=True,
            )


def _serve(settings: Settings, sockets: list[socket.socket]) -> None:
    from gateway.app import create_app

    gateway_app = create_app(settings)
    config = uvicorn.Config(
        gateway_app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) or None,
    )
    _AnnouncingServer(config, settings, gateway_app.state.webchat_streams).run(sockets=sockets)


def _holding_database(settings: Settings) -> AbstractContextManager[None]:
    """Mark an embedded SQLite database as in use: `hubbub restore` refuses meanwhile."""
    from agent_core.db.backup import hold_database, sqlite_path
    from agent_core.errors import InvalidInput

    try:
        database = sqlite_path(settings.resolved_database_url)
    except InvalidInput:
        return nullcontext()  # Postgres, or an in-memory database: nothing to restore into
    return hold_database(database)


def _exit_quietly(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


@app.command()
def up(host: Host = None, port: Port = None) -> None:
    """Migrate, then run everything on this machine.

    With no HUBBUB_REDIS_URL, turns run inside this process on the embedded SQLite
    database: nothing else is needed. With Redis configured, a Celery worker is started
    beside the gateway.
    """
    settings = _settings(host=host, port=port)
    sockets = _listen(settings)
    with _holding_database(settings):
        _run_up(settings, sockets)


def _run_up(settings: Settings, sockets: list[socket.socket]) -> None:
    upgrade_to_head(settings.resolved_database_url)
    worker: WorkerSupervisor | None = None
    if settings.redis_url is not None:
        from gateway.supervisor import WorkerSupervisor

        worker = WorkerSupervisor(
            [sys.executable, "-m", "gateway.cli", "worker", "--parent-pid", str(os.getpid())],
            grace_seconds=settings.shutdown_grace_seconds,
        )
        worker.start()
    # uvicorn re-raises the SIGTERM it shut down on; exiting through Python instead lets the
    # worker be stopped below rather than orphaned.
    signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        _serve(settings, sockets)
    finally:
        if worker is not None:
            worker.stop()


@app.command()
def gateway(host: Host = None, port: Port = None) -> None:
    """Run the HTTP gateway only (production: run `hubbub migrate` first)."""
    settings = _settings(host=host, port=port)
    sockets = _listen(settings)
    with _holding_database(settings):
        _serve(settings, sockets)


PARENT_CHECK_SECONDS = 1.0
"""How often ``hubbub up``'s worker child looks whether ``hubbub up`` still runs."""


def stop_when_orphaned(parent_pid: int) -> None:
    """Stop this worker (a warm shutdown) once ``parent_pid`` is no longer its parent.

    A ``hubbub up`` killed outright (SIGKILL, the OOM killer) cannot stop its worker; left
    running, the orphan would go on answering from a deployment that is down.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_SECONDS)
        log.warning("hubbub up is gone; stopping its worker", extra={"parent_pid": parent_pid})
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="hubbub-parent-watch", daemon=True).start()


@app.command()
def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Turns run at once (HUBBUB_WORKER_CONCURRENCY).")
    ] = None,
    parent_pid: Annotated[
        int | None,
        typer.Option(hidden=True, help="Stop when this process is gone (`hubbub up`'s child)."),
    ] = None,
) -> None:
    """Run a Celery worker that answers queued messages (needs HUBBUB_REDIS_URL)."""
    settings = _settings(worker_concurrency=concurrency)
    if parent_pid is not None:
        stop_when_orphaned(parent_pid)
    if settings.redis_url is None:
        typer.secho(
            "HUBBUB_REDIS_URL is not set. Workers need Redis; without it `hubbub up` runs "
            "turns in-process.",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(2)
    if concurrency is not None:
        os.environ["HUBBUB_WORKER_CONCURRENCY"] = str(concurrency)
    from celery.bin.celery import celery as celery_command

    # ``app.worker_main`` and ``app.start`` drop the worker's exit code; Celery's own
    # command, run standalone, exits with it, so a worker that stops on an unrecoverable
    # error exits non-zero and whatever supervises it restarts it.
    celery_command.main(
        [
            "--app",
            "workers.app",
            "worker",
            "--loglevel",
            settings.log_level,
            "--pool",
            "threads",
            "--concurrency",
            str(settings.worker_concurrency),
            "--without-gossip",
            "--without-mingle",
            "--queues",
            "hubbub",
        ],
        prog_name="hubbub worker",
    )


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    settings = _settings()
    upgrade_to_head(settings.resolved_database_url)
    typer.echo("Database schema is up to date.")


@app.command()
def backup(path: backup_cli.Target, force: backup_cli.BackupForce = False) -> None:
    """Copy the embedded SQLite database to PATH, consistent while `hubbub up` runs."""
    backup_cli.backup(_settings(), path, force=force)


@app.command()
def restore(path: backup_cli.Target, force: backup_cli.RestoreForce = False) -> None:
    """Replace the embedded SQLite database with the backup PATH (gateway stopped)."""
    backup_cli.restore(_settings(), path, force=force)


@app.command()
def doctor() -> None:
    """Check the database, broker, model settings and offline tokenizer files."""
    from gateway.doctor import run_checks

    settings = _settings()
    # Doctor's output is its report; alembic's chatter about the schema check is not.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    failed = False
    for check in run_checks(settings):
        mark = "ok  " if check.ok else ("warn" if check.warning else "FAIL")
        colour = typer.colors.GREEN if check.ok else typer.colors.YELLOW
        if not check.ok and not check.warning:
            colour, failed = typer.colors.RED, True
        typer.secho(f"[{mark}] {check.name}: {check.detail}", fg=colour)
        if check.fix:
            typer.echo(f"       fix: {check.fix}")
    raise typer.Exit(1 if failed else 0)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"hubbub {package_version('hubbub')}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Hubbub: one LLM agent behind your Telegram, Discord, Slack and web chats."""


def _command_settings(ctx: typer.Context) -> None:
    ctx.obj = _settings()


app.add_typer(sessions_cli.app, name="sessions", callback=_command_settings)
app.add_typer(admin_cli.tenants, name="tenants", callback=_command_settings)
app.add_typer(admin_cli.bots, name="bots", callback=_command_settings)
app.add_typer(keys_cli.app, name="keys", callback=_command_settings)
app.add_typer(usage_cli.budgets, name="budgets", callback=_command_settings)


@app.command("usage")
def usage(
    tenant: Annotated[str, typer.Option(help="The tenant.")],
    first: Annotated[
        datetime | None,
        typer.Option("--from", formats=["%Y-%m-%d"], help="First day (default: the 1st)."),
    ] = None,
    last: Annotated[
        datetime | None,
        typer.Option("--to", formats=["%Y-%m-%d"], help="Last day, included (default: today)."),
    ] = None,
    group_by: usage_cli.GroupBy = "day",
) -> None:
    """A tenant's tokens and cost (main and summary calls), by day, bot, user or model."""
    usage_cli.print_usage(
        _settings(),
        tenant,
        first.date() if first else None,
        last.date() if last else None,
        group_by,
    )


if __name__ == "__main__":
    app()
