"""The ``hubbub`` command: ``up``, ``gateway``, ``worker``, ``migrate``, ``doctor``."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import subprocess
import sys
from importlib.metadata import version as package_version
from typing import Annotated

import typer
import uvicorn
from pydantic import ValidationError

from agent_core.config import Settings, load_settings
from agent_core.db.migrations import upgrade_to_head
from agent_core.logs import configure_logging
from gateway import admin_cli, sessions_cli

app = typer.Typer(
    help="Hubbub: one LLM agent behind your Telegram, Discord, Slack and web chats.",
    no_args_is_help=True,
    add_completion=False,
)

Host = Annotated[str | None, typer.Option(help="Interface to listen on (HUBBUB_HOST).")]
Port = Annotated[int | None, typer.Option(help="Port to listen on (HUBBUB_PORT).")]
LISTEN_BACKLOG = 2048
"""Pending connections the kernel queues (uvicorn's default)."""


def _settings(**overrides: object) -> Settings:
    try:
        settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except (ValidationError, FileNotFoundError) as exc:
        typer.secho(f"Invalid configuration:\n{exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    configure_logging(settings.log_level, json_lines=settings.log_json)
    return settings


def _listen(settings: Settings) -> socket.socket:
    """The gateway's listening socket, bound before anything starts.

    Raises:
        typer.Exit: the port is taken (one line says so) or the address is unusable.
    """
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            message = f"port {settings.port} is in use — set HUBBUB_PORT or stop the other process"
        else:
            message = f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}"
        typer.secho(message, fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    sock.set_inheritable(True)
    return sock


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that says where to chat once it is serving, not before."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            host, port = self.config.host, self.config.port
            shown = f"[{host}]" if ":" in host else host
            typer.echo(f"Hubbub is up at http://{shown}:{port}/", err=True)


def _serve(settings: Settings, sock: socket.socket) -> None:
    from gateway.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) or None,
    )
    _AnnouncingServer(config).run(sockets=[sock])


@app.command()
def up(host: Host = None, port: Port = None) -> None:
    """Migrate, then run everything on this machine.

    With no HUBBUB_REDIS_URL, turns run inside this process on the embedded SQLite
    database: nothing else is needed. With Redis configured, a Celery worker is started
    beside the gateway.
    """
    settings = _settings(host=host, port=port)
    sock = _listen(settings)
    upgrade_to_head(settings.resolved_database_url)
    worker: subprocess.Popen[bytes] | None = None
    if settings.redis_url is not None:
        worker = subprocess.Popen([sys.executable, "-m", "gateway.cli", "worker"])
    try:
        _serve(settings, sock)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=settings.shutdown_grace_seconds + 10)


@app.command()
def gateway(host: Host = None, port: Port = None) -> None:
    """Run the HTTP gateway only (production: run `hubbub migrate` first)."""
    settings = _settings(host=host, port=port)
    _serve(settings, _listen(settings))


@app.command()
def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Turns run at once (HUBBUB_WORKER_CONCURRENCY).")
    ] = None,
) -> None:
    """Run a Celery worker that answers queued messages (needs HUBBUB_REDIS_URL)."""
    settings = _settings(worker_concurrency=concurrency)
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
    from workers.app import app as celery_app

    celery_app.worker_main(
        [
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
        ]
    )


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    settings = _settings()
    upgrade_to_head(settings.resolved_database_url)
    typer.echo("Database schema is up to date.")


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


if __name__ == "__main__":
    app()
