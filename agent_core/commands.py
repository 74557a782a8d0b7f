"""Chat commands: answered by Hubbub, never by the model.

``/help``, ``/new``, ``/usage``, ``/memory``, ``/forget`` and ``/model`` are answered here;
``/compress`` (alias ``/compact``) runs a compaction, so the turn runner handles it outside
any database transaction. ``/stop`` stops the session's running turn at its next safe point
(:mod:`agent_core.busy`); that turn's runner answers it with :data:`STOPPED_REPLY`, so the
handler here only ever runs when nothing was running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_core.busy import STOP_COMMAND
from agent_core.compaction.triggers import Lines
from agent_core.context import ContextEngine
from agent_core.db.models import ChatSession, MemoryScope, Message
from agent_core.memory import service as memory
from agent_core.prompt.assembler import memory_place
from agent_core.sessions.service import Conversation, start_new_session
from agent_core.tenancy.settings import ModelChoice
from agent_core.tokens import TokenCounter
from agent_core.usage import Budgets, UsageScope
from agent_core.usage.report import usage_lines


@dataclass(frozen=True, slots=True)
class ContextGauge:
    """How full the session's context is, against the model's window and both thresholds."""

    context_length: int
    threshold_tokens: int
    """Where the compressor starts (50 % of the usable window by default)."""
    hygiene_threshold_tokens: int
    """Where the pre-agent safety net starts (85 %)."""
    used_tokens: int
    measured: bool
    """``used_tokens`` is the provider's count of the last prompt (else our own count)."""

    @classmethod
    def of(
        cls, engine: ContextEngine, chat_session: ChatSession, counter: TokenCounter
    ) -> ContextGauge:
        """The gauge of a session whose stored state ``engine`` holds."""
        used = engine.last_prompt_tokens or chat_session.active_tokens + counter.count_text(
            chat_session.system_prompt or ""
        )
        return cls(
            context_length=engine.context_length,
            threshold_tokens=engine.threshold_tokens,
            hygiene_threshold_tokens=Lines.of(engine).hygiene,
            used_tokens=used,
            measured=engine.last_prompt_tokens > 0,
        )


@dataclass(frozen=True, slots=True)
class CommandContext:
    """What a command handler may use."""

    db: Session
    chat_session: ChatSession
    message: Message
    args: str
    gauge: ContextGauge | None
    """``None`` when no model is configured."""
    budgets: Budgets | None = None
    """Reads usage and budgets for ``/usage`` (``None``: not reported)."""
    models: ModelChoice | None = None
    """The models ``/model`` offers this session, and its default."""


Handler = Callable[[CommandContext], str]


def _help(_: CommandContext) -> str:
    lines = ["Commands:"]
    lines += [f"/{name} — {summary}" for name, (summary, _h) in COMMANDS.items()]
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
    lines = []
    gauge = ctx.gauge
    if gauge is None:
        lines.append("No model is configured, so there is no context window to measure.")
    else:
        source = "the provider's count of the last prompt" if gauge.measured else "estimated"
        lines += [
            f"Context: {gauge.used_tokens:,} of {gauge.context_length:,} tokens "
            f"({gauge.used_tokens / gauge.context_length:.0%}, {source}).",
            f"Compaction starts at {gauge.threshold_tokens:,} tokens; the safety net at "
            f"{gauge.hygiene_threshold_tokens:,}.",
        ]
    lines.append(f"Transcript: {s.active_count:,} messages, {s.active_tokens:,} tokens.")
    lines.append(f"Compactions so far: {s.compaction_count}.")
    lines.append(f"Tokens spent in this session: {s.tokens_spent:,}.")
    if ctx.budgets is not None:
        scope = UsageScope.of(s, ctx.message.speaker_id)
        lines += usage_lines(ctx.db, ctx.budgets, scope)
    return "\n".join(lines)


def _memory(ctx: CommandContext) -> str:
    place = memory_place(ctx.db, ctx.chat_session, ctx.message.speaker_id)
    entries = memory.about_you(ctx.db, place)
    if not entries:
        return "I remember nothing about you in this chat."
    if place.is_group:
        lines = ["What I remember for this group:"]
    else:
        lines = ["What I remember about you and this chat:"]
    lines += [
        f"- {entry.content}" + (" (about you)" if entry.scope == MemoryScope.USER else "")
        for entry in entries
    ]
    lines.append(
        "New or changed memories take effect in new sessions (/new). /forget removes them."
    )
    return "\n".join(lines)


def _forget(ctx: CommandContext) -> str:
    place = memory_place(ctx.db, ctx.chat_session, ctx.message.speaker_id)
    removed = memory.forget(ctx.db, place, ctx.args)
    if not removed:
        what = f" matching {ctx.args.strip()!r}" if ctx.args.strip() else ""
        return f"Nothing to forget{what}."
    scope = "for this group that came from you" if place.is_group else "about you here"
    plural = "memory" if removed == 1 else "memories"
    return (
        f"Forgot {removed} {plural} {scope}. The current session keeps what it already knew; "
        "/new starts one without it."
    )


def _model(ctx: CommandContext) -> str:
    choice = ctx.models
    if choice is None or not choice.allowed:
        return "No model is configured, so there is none to choose."
    s = ctx.chat_session
    current = choice.pick(s.model)
    wanted = ctx.args.strip()
    if wanted and wanted in choice.allowed:
        s.model = wanted
        if wanted == current:
            return f"This session already uses {wanted}."
        return (
            f"This session now uses {wanted}. Its context window and compaction lines follow "
            "that model from the next message."
        )
    lines = [f"There is no model {wanted!r} here. Models:"] if wanted else ["Models:"]
    lines += [f"- {m}" + (" (current)" if m == current else "") for m in choice.allowed]
    lines.append("/model NAME switches this session.")
    return "\n".join(lines)


STOPPED_REPLY = "Stopped. I dropped the reply I was writing."
"""The answer to a ``/stop`` that stopped a running turn."""


def _stop(_: CommandContext) -> str:
    # Reached in turn order: any turn before this /stop has ended, none was stopped by it.
    return "Nothing is running, so there is nothing to stop."


COMPACTION_COMMANDS = frozenset({"compress", "compact"})
"""Commands that run a compaction (the turn runner runs them outside any transaction)."""

COMMANDS: dict[str, tuple[str, Handler | None]] = {
    "help": ("list the commands", _help),
    "new": ("start a fresh session (the old one is kept)", _new),
    "usage": ("show the context window in use, what was spent and the budgets", _usage),
    "memory": ("list what I remember about you in this chat", _memory),
    "forget": ("forget what I remember about you here; add text to forget only matches", _forget),
    "model": ("list the models; /model NAME switches this session to one", _model),
    "compress": ("summarise older turns now; add a topic to keep it in detail", None),
    "compact": ("the same as /compress", None),
    STOP_COMMAND: ("stop the reply I am writing now", _stop),
}


def is_command(name: str | None) -> bool:
    """Whether ``name`` (without the slash) is a command Hubbub answers itself."""
    return name is not None and name.lower() in COMMANDS


def unknown_command_reply(name: str) -> str:
    """What a person who typed ``/name`` is told when Hubbub has no such command."""
    known = " ".join(f"/{command}" for command in COMMANDS)
    return f"Unknown command /{name} — commands: {known} (/help says what they do)."


def run_command(name: str, ctx: CommandContext) -> str:
    """Answer a command that needs no model call; the text is the reply shown to the user.

    A name Hubbub does not know is answered with the list of those it does: a command is
    never passed to the model as text.

    Raises:
        KeyError: ``name`` is run by the turn runner (``/compress``), not here.
    """
    entry = COMMANDS.get(name.lower())
    if entry is None:
        return unknown_command_reply(name)
    handler = entry[1]
    if handler is None:
        raise KeyError(name)
    return handler(ctx)
