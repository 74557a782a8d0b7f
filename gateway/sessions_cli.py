"""``hubbub sessions``: look at sessions, compactions, archive and replies; undo a compaction."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.repository import CompactionRepository
from agent_core.compaction.service import restore_latest
from agent_core.config import Settings
from agent_core.db.engine import (
    create_db_engine,
    make_session_factory,
    read_transaction,
    transaction,
)
from agent_core.db.models import OutboxState
from agent_core.outbox.repository import OutboxRepository
from agent_core.sessions.repository import SessionRepository

app = typer.Typer(help="Inspect sessions, their compactions and archived turns.")

PREVIEW_CHARS = 160


def _factory(ctx: typer.Context) -> sessionmaker[Session]:
    settings: Settings = ctx.obj
    return make_session_factory(create_db_engine(settings.resolved_database_url))


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    platform: Annotated[str | None, typer.Option(help="Only this platform.")] = None,
) -> None:
    """The newest sessions with their size and compaction count."""
    with read_transaction(_factory(ctx)) as db:
        for s in SessionRepository.from_session(db).list_recent(limit=limit, platform=platform):
            current = "current" if s.is_current else "ended"
            typer.echo(
                f"{s.id}  {s.platform}:{s.chat_id}{'/' + s.thread_id if s.thread_id else ''}  "
                f"{s.chat_type}  {current}  {s.active_count} msgs / {s.active_tokens:,} tokens  "
                f"{s.compaction_count} compactions"
            )


@app.command()
def compactions(ctx: typer.Context, session_id: str) -> None:
    """Every compaction of a session: trigger, strategy, tokens, what it archived."""
    with read_transaction(_factory(ctx)) as db:
        rows = CompactionRepository.from_session(db).list_for_session(session_id)
        if not rows:
            typer.echo("No compactions.")
        for c in rows:
            state = " (undone)" if c.restored else ""
            typer.echo(
                f"#{c.id} {c.created_at:%Y-%m-%d %H:%M} {c.trigger}/{c.strategy}{state}: "
                f"{c.tokens_before:,} -> {c.tokens_after:,} tokens, {c.archived_count} archived, "
                f"{c.summary_calls} summary calls, cpu {c.cpu_ms or 0:.0f} ms"
            )


@app.command()
def archive(
    ctx: typer.Context,
    session_id: str,
    grep: Annotated[
        str | None, typer.Option(help="Only archived messages containing this.")
    ] = None,
) -> None:
    """The session's archived (compacted) messages, in order."""
    with read_transaction(_factory(ctx)) as db:
        repo = CompactionRepository.from_session(db)
        found = repo.search_archive(session_id, grep) if grep else repo.archived(session_id)
        for m in found:
            who = m.speaker_name or m.role
            text = (m.content or "").replace("\n", " ")
            typer.echo(f"[{m.id}] {who}: {text[:PREVIEW_CHARS]}")
        typer.echo(f"{len(found)} archived messages.", err=True)


@app.command()
def deliveries(
    ctx: typer.Context,
    state: Annotated[
        str, typer.Option(help="pending, sending, sent, failed or unknown.")
    ] = OutboxState.UNKNOWN,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
) -> None:
    """Replies in one delivery state; ``unknown`` ones may or may not have reached the chat."""
    if state not in set(OutboxState):
        typer.secho(f"No delivery state {state!r}.", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    with transaction(_factory(ctx)) as db:
        found = OutboxRepository.from_session(db).list_by_state(state, limit=limit)
        for e in found:
            where = f"{e.platform}:{e.chat_id}{'/' + e.thread_id if e.thread_id else ''}"
            typer.echo(
                f"#{e.id} {where} session {e.session_id} {e.created_at:%Y-%m-%d %H:%M} "
                f"{e.state} after {e.attempts} attempt(s), {e.delivered_chunks} chunk(s) "
                f"delivered: {e.last_error or '-'}"
            )
    typer.echo(f"{len(found)} {state} replies.", err=True)


@app.command()
def restore(ctx: typer.Context, session_id: str) -> None:
    """Undo the session's newest compaction: its messages become active again."""
    with transaction(_factory(ctx)) as db:
        chat_session = SessionRepository.from_session(db).get(session_id, for_update=True)
        if chat_session is None:
            typer.secho(f"No session {session_id}.", fg=typer.colors.RED, err=True)
            raise typer.Exit(1)
        undone = restore_latest(db, chat_session)
    if undone is None:
        typer.echo("Nothing to undo.")
    else:
        typer.echo(f"Undid compaction #{undone.id}: {undone.archived_count} messages are back.")
