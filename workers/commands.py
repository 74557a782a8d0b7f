"""Chat commands (``/help``, ``/new``, ``/usage``): answered by the gateway, never by the model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_core.db.models import ChatSession, Message
from agent_core.sessions.service import Conversation, start_new_session


@dataclass(frozen=True, slots=True)
class CommandContext:
    """What a command handler may use."""

    db: Session
    chat_session: ChatSession
    message: Message
    args: str
    context_length: int | None
    """The main model's window, when a model is configured."""


Handler = Callable[[CommandContext], str]


def _help(_: CommandContext) -> str:
    lines = ["Commands:"]
    lines += [f"/{name} — {summary}" for name, (summary, _h) in sorted(COMMANDS.items())]
    return "\n".join(lines)


def _new(ctx: CommandContext) -> str:
    s = ctx.chat_session
    start_new_session(
        ctx.db,
        Conversation(
            tenant_id=s.tenant_id,
            bot_id=s.bot_id,
            platform=s.platform,
            chat_id=s.chat_id,
            thread_id=s.thread_id,
            chat_type=s.chat_type,
        ),
    )
    return "Started a fresh session. The previous conversation is kept but no longer in context."


def _usage(ctx: CommandContext) -> str:
    s = ctx.chat_session
    used = s.last_prompt_tokens or s.active_tokens
    lines = [f"Context: {used:,} tokens in use (last prompt as the provider counted it)."]
    if ctx.context_length:
        lines[0] = (
            f"Context: {used:,} of {ctx.context_length:,} tokens ({used / ctx.context_length:.0%})."
        )
    lines.append(f"Transcript: {s.active_tokens:,} tokens in active messages.")
    lines.append(f"Tokens spent in this session: {s.tokens_spent:,}.")
    lines.append(f"Compactions so far: {s.compaction_count}.")
    return "\n".join(lines)


COMMANDS: dict[str, tuple[str, Handler]] = {
    "help": ("list the commands", _help),
    "new": ("start a fresh session (the old one is kept)", _new),
    "usage": ("show how much of the model's context window is in use", _usage),
}


def is_command(name: str | None) -> bool:
    """Whether ``name`` (without the slash) is a command Hubbub answers itself."""
    return name is not None and name.lower() in COMMANDS


def run_command(name: str, ctx: CommandContext) -> str:
    """Answer a command; the text is the reply shown to the user."""
    _summary, handler = COMMANDS[name.lower()]
    return handler(ctx)
