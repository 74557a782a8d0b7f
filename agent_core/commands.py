"""Chat commands: answered by Hubbub, never by the model.

``/help``, ``/new`` and ``/usage`` are answered here; ``/compress`` (alias ``/compact``)
runs a compaction, so the turn runner handles it outside any database transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_core.compaction.triggers import Lines
from agent_core.context import ContextEngine
from agent_core.db.models import ChatSession, Message
from agent_core.sessions.service import Conversation, start_new_session
from agent_core.tokens import TokenCounter


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
    return "\n".join(lines)


COMPACTION_COMMANDS = frozenset({"compress", "compact"})
"""Commands that run a compaction (the turn runner runs them outside any transaction)."""

COMMANDS: dict[str, tuple[str, Handler | None]] = {
    "help": ("list the commands", _help),
    "new": ("start a fresh session (the old one is kept)", _new),
    "usage": ("show how much of the model's context window is in use", _usage),
    "compress": ("summarise older turns now; add a topic to keep it in detail", None),
    "compact": ("the same as /compress", None),
}


def is_command(name: str | None) -> bool:
    """Whether ``name`` (without the slash) is a command Hubbub answers itself."""
    return name is not None and name.lower() in COMMANDS


def run_command(name: str, ctx: CommandContext) -> str:
    """Answer a command that needs no model call; the text is the reply shown to the user.

    Raises:
        KeyError: ``name`` is not such a command (``/compress`` is run by the turn runner).
    """
    handler = COMMANDS[name.lower()][1]
    if handler is None:
        raise KeyError(name)
    return handler(ctx)
