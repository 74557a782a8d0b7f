"""Long-thread benchmark: a busy #ubuntu IRC night replayed as one group session.

Real excerpts of the #ubuntu channel (``../shared/corpora/ubuntu-irc``, CC-BY-4.0,
Kummerfeld et al., ACL 2019) are concatenated in chronological order and replayed through
the real pipeline (``build_runtime``: intake, SQLite, the embedded runner's background
compactions and turns, litellm over HTTP) as one group session of a 128k-window model.
The local fake provider's latency grows with the prompt (20 ms per 1,000 prompt tokens by
default) and it answers summary requests like a summary model that copies nothing.

Phases:

* **day**: the excerpts before the night, with a real question (a line ending in ``?``)
  addressed to the bot every few hundred messages; before each of these ordinary turns
  the session is allowed to settle (no compaction running), and the replay waits for
  the reply;
* **night**: at least ``--messages`` messages and ``--min-tokens`` stored tokens of
  un-addressed chatter, ending with the corpus's longest real overnight stretch
  (``2008-04-27.train-a``), sent as fast as intake accepts them (or ``--rate``);
  background compactions run concurrently, as in production;
* **morning**: the first question is sent the moment the night ends, without waiting
  for anything; then, after settling, a few follow-up questions on the same session:
  the ordinary turns it is compared with (same session, same size);
* **direct**: a separate session of ``--direct-messages`` (5,000) corpus messages is
  compacted with the manual trigger (``Compactor.run``), undone and compacted again:
  the compressor CPU of a 5,000-message transcript.

The fake provider refuses prompts larger than the model's window (400
``context_length_exceeded``), as a real one does (``--no-enforce-window`` turns that off).
Everything reported is read from what the pipeline stored (the ``compactions`` table,
messages, outbox), from the requests the fake provider received, and from a wrapper that
records every ``Compactor.run`` call (also those that change nothing and write no row).

Usage: ``python -m bench.long_thread [--messages N] [--min-tokens T] [--day-messages N]
[--day-turns N] [--followups N] [--ms-per-1k MS] [--summary-window TOKENS]
[--rate MSG_PER_S]``; prints JSON. ``--day-turns 0`` replays a day in which nobody
addressed the bot.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from sqlalchemy import func, select

import agent_core  # noqa: F401  (offline tokenizer environment)
from adapters.messages import InboundMessage
from agent_core.compaction.repository import CompactionRepository
from agent_core.compaction.runner import CompactionReport, Compactor
from agent_core.compaction.service import restore_latest
from agent_core.compaction.triggers import Trigger, background_line
from agent_core.config import Settings
from agent_core.context import compute_threshold_tokens
from agent_core.context.identifiers import find_identifiers, parse_ledger
from agent_core.context.markers import SUMMARY_END_MARKER, SUMMARY_PREFIX
from agent_core.context.summarizer import REQUEST_WINDOW_SHARE
from agent_core.context.summary_prompt import GROUP_SECTION, TEMPLATE
from agent_core.db.engine import read_transaction, transaction
from agent_core.db.migrations import upgrade_to_head
from agent_core.db.models import ChatSession, Compaction, Message, OutboxEntry, SessionLock
from agent_core.errors import InvalidInput
from agent_core.sessions import lock
from agent_core.tokens import TokenCounter
from agent_core.tools.builtins.search import SessionSearchTool
from bench.machine import machine, speed_probe_ms
from gateway.app import build_runtime
from tests.fixtures.llm_server import (
    Failure,
    FakeLLM,
    LLMServerThread,
    ScriptedReply,
    is_summary_request,
    tool_call,
)
from workers.intake import Intake
from workers.runtime import Runtime

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpora" / "ubuntu-irc"
NIGHT_END = "2008-04-27.train-a"
"""The corpus's longest single-night stretch (1,939 messages, 04:46-06:59): the night ends
with it."""
CONTEXT_LENGTH = 128_000
CHAT_ID = "ubuntu"
DIRECT_CHAT_ID = "ubuntu-direct"
TARGET_CPU_MS = 150.0
TARGET_RECENT_VERBATIM = 0.95
TARGET_FINDABLE = 1.0
TARGET_LATENCY_RATIO = 1.10
POLL_SECONDS = 0.005
TURN_TIMEOUT_SECONDS = 300.0
SAMPLE_EVERY = 100
"""Messages between two samples of the session's size during the replay."""

_LINE = re.compile(
    r"\[(?P<time>\d\d:\d\d)\] (?:<(?P<nick>[^>]+)> ?(?P<text>.*)|\* (?P<actor>\S+)(?P<action>.*))"
)

FILLER_TEXT = (
    "people in the channel asked for help with their systems and others answered with "
    "suggestions and explanations while some problems were solved and some questions "
    "stayed open until later in the night"
)
FILLER = FILLER_TEXT.split()
SUMMARY_HEADINGS = tuple(
    line for line in f"{TEMPLATE}\n{GROUP_SECTION}".splitlines() if line.startswith("## ")
)
"""The headings Hubbub asks summaries for, in order: the fake model writes them all."""


# -- corpus -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IrcLine:
    """One human message of the corpus."""

    uid: str
    """``split/excerpt:line`` (0-based line number in the raw file)."""
    nick: str
    text: str

    @property
    def is_question(self) -> bool:
        """A line that asks something (used as a question addressed to the bot)."""
        return self.text.rstrip().endswith("?") and len(self.text.split()) >= 4


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One raw file of the corpus, ``===`` system lines dropped."""

    name: str
    lines: tuple[IrcLine, ...]


def load_corpus(root: Path) -> list[Excerpt]:
    """Every excerpt of the corpus, in chronological (file name) order."""
    paths = sorted((root / "data").glob("*/*.raw.txt"), key=lambda p: p.name)
    if not paths:
        raise SystemExit(f"no corpus under {root}/data (see ../shared/corpora/README.md)")
    excerpts = []
    for path in paths:
        name = path.name.removesuffix(".raw.txt")
        lines = []
        raw_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, raw in enumerate(raw_lines):
            if raw.startswith("==="):
                continue
            match = _LINE.fullmatch(raw)
            if match is None:
                continue
            if match["nick"] is not None:
                nick, text = match["nick"], match["text"]
            else:
                nick, text = match["actor"], f"* {match['actor']}{match['action']}"
            if text.strip():
                lines.append(IrcLine(f"{path.parent.name}/{name}:{number}", nick, text))
        excerpts.append(Excerpt(name, tuple(lines)))
    return excerpts


@dataclass(slots=True)
class Plan:
    """What is replayed, in which phase."""

    day: list[IrcLine]
    day_questions: set[str]
    night: list[IrcLine]
    night_excerpts: list[str]
    morning: list[IrcLine]
    direct: list[IrcLine]


def stored_tokens(counter: TokenCounter, line: IrcLine) -> int:
    """What intake stores as the message's token count."""
    return counter.count_message({"role": "user", "content": line.text})


def plan_replay(
    excerpts: Sequence[Excerpt],
    counter: TokenCounter,
    *,
    night_end: str,
    min_messages: int,
    min_tokens: int,
    day_messages: int,
    day_turns: int,
    morning_turns: int,
    direct_messages: int,
) -> Plan:
    """Choose the night (whole excerpts ending with ``night_end``), the day before it, the
    morning questions after it and the transcript of the direct measurement."""
    names = [e.name for e in excerpts]
    if night_end not in names:
        raise SystemExit(f"excerpt {night_end} not in the corpus")
    end = names.index(night_end)
    start = end + 1
    messages = tokens = 0
    while messages < min_messages or tokens < min_tokens:
        if start == 0:
            raise SystemExit("the corpus before the night end is too small for these limits")
        start -= 1
        messages += len(excerpts[start].lines)
        tokens += sum(stored_tokens(counter, line) for line in excerpts[start].lines)
    night_excerpts = list(excerpts[start : end + 1])
    night = [line for e in night_excerpts for line in e.lines]

    before = [line for e in excerpts[:start] for line in e.lines]
    day = before[-day_messages:] if day_messages else []
    day_questions: set[str] = set()
    if day and day_turns:
        step = len(day) // day_turns
        for k in range(day_turns):
            position = (k + 1) * step - 1
            # The next question at or after the checkpoint (wrapping back when none is left).
            found = next((line for line in day[position:] if line.is_question), None)
            if found is None:
                found = next(line for line in reversed(day[:position]) if line.is_question)
            day_questions.add(found.uid)

    after = [line for e in excerpts[end + 1 :] for line in e.lines]
    morning = [line for line in after if line.is_question][:morning_turns]
    if len(morning) < morning_turns:
        raise SystemExit("not enough questions after the night end")
    # The direct measurement uses the night's own text (a different session).
    direct = night[:direct_messages]
    return Plan(day, day_questions, night, [e.name for e in night_excerpts], morning, direct)


def inbound(line: IrcLine, *, chat_id: str, addressed: bool, prefix: str = "") -> InboundMessage:
    """The corpus line as a web chat group message from its nick."""
    return InboundMessage(
        platform="webchat",
        chat_id=chat_id,
        chat_type="group",
        message_id=f"{prefix}{line.uid}",
        sender_id=line.nick,
        sender_name=line.nick,
        text=line.text,
        addressed=addressed,
    )


# -- the fake summary model -----------------------------------------------------------------


def template_summary(fill: float) -> Callable[[dict[str, Any]], str]:
    """A summary model that writes the template's headings with generic prose.

    It fills about ``fill`` of the request's ``max_tokens`` and copies nothing from the
    turns: every identifier in the prompt after a compaction got there through Hubbub's
    own ledger or the kept tail, never through the model.
    """

    def reply(body: dict[str, Any]) -> str:
        budget = int(body.get("max_tokens") or 1_000)
        words = max(len(SUMMARY_HEADINGS), int(budget * fill))
        per_section = max(1, words // len(SUMMARY_HEADINGS))
        parts = []
        for index, heading in enumerate(SUMMARY_HEADINGS):
            prose = " ".join(FILLER[(index + i) % len(FILLER)] for i in range(per_section))
            parts.append(f"{heading}\n{prose.capitalize()}.")
        return "\n".join(parts)

    return reply


class WindowedFakeLLM(FakeLLM):
    """The fake provider, refusing prompts larger than the model's window at once.

    A real provider answers 400 ``context_length_exceeded`` before doing any work, so the
    refusal does not wait the prompt-sized latency.
    """

    def __init__(self) -> None:
        super().__init__()
        self.windows: dict[str, int] = {}
        """Model name (as sent, without ``openai/``) -> window; empty: accept anything."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``, with the window check first."""
        if self.windows:
            body = await request.json()  # aiohttp caches the body for the second read
            model = str(body.get("model", "")).removeprefix("openai/")
            limit = self.windows.get(model, CONTEXT_LENGTH)
            if self.counter.count_messages(body.get("messages", [])) > limit:
                with self._lock:
                    self.requests.append(body)
                failure = Failure.overflow(limit)
                payload = {"error": {"message": failure.message, "code": failure.code}}
                return web.json_response(payload, status=failure.status)
        return await super().handle(request)


# -- instrumentation ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call of ``Compactor.run``, whatever it decided."""

    trigger: str
    outcome: str
    session_id: str
    started: float
    """``time.perf_counter()`` at the call."""
    wall_ms: float
    thread_cpu_ms: float
    """The calling thread's CPU for the whole call: lease, load, compress, apply."""


class AttemptLog:
    """Records every compaction attempt (also those that write no ``compactions`` row).

    It wraps the runtime's one :class:`~agent_core.compaction.runner.Compactor` instance; behaviour
    is unchanged.
    """

    def __init__(self, compactor: Compactor) -> None:
        self.attempts: list[Attempt] = []
        self._lock = threading.Lock()
        self._run = compactor.run

        def run(session_id: str, trigger: Trigger, **kwargs: Any) -> CompactionReport:
            cpu, wall = time.thread_time(), time.perf_counter()
            report = self._run(session_id, trigger, **kwargs)
            attempt = Attempt(
                str(trigger),
                report.outcome,
                session_id,
                wall,
                (time.perf_counter() - wall) * 1000,
                (time.thread_time() - cpu) * 1000,
            )
            with self._lock:
                self.attempts.append(attempt)
            return report

        compactor.run = run  # type: ignore[method-assign]

    def between(self, session_id: str, start: float, end: float) -> list[Attempt]:
        """Attempts on the session that started within ``[start, end]`` (perf_counter)."""
        with self._lock:
            return [
                a for a in self.attempts if a.session_id == session_id and start <= a.started <= end
            ]

    def summary(self, session_id: str) -> dict[str, Any]:
        """Attempts on one session, by trigger."""
        with self._lock:
            attempts = [a for a in self.attempts if a.session_id == session_id]
        out: dict[str, Any] = {}
        for trigger in sorted({a.trigger for a in attempts}):
            mine = [a for a in attempts if a.trigger == trigger]
            out[trigger] = {
                "attempts": len(mine),
                "wall_seconds_total": round(sum(a.wall_ms for a in mine) / 1000, 2),
                "thread_cpu_seconds_total": round(sum(a.thread_cpu_ms for a in mine) / 1000, 2),
                "by_outcome": {
                    outcome: {
                        "attempts": sum(1 for a in mine if a.outcome == outcome),
                        "thread_cpu_ms": _stats(
                            [a.thread_cpu_ms for a in mine if a.outcome == outcome]
                        ),
                        "wall_ms": _stats([a.wall_ms for a in mine if a.outcome == outcome]),
                    }
                    for outcome in sorted({a.outcome for a in mine})
                },
            }
        return out


# -- database reads -------------------------------------------------------------------------


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def session_size(runtime: Runtime, session_id: str) -> tuple[int, int]:
    """The session's active (tokens, messages), as the pipeline keeps them."""
    with read_transaction(runtime.factory) as db:
        chat_session = db.get(ChatSession, session_id)
        assert chat_session is not None
        return chat_session.active_tokens, chat_session.active_count


def compaction_lease_held(runtime: Runtime, session_id: str) -> bool:
    with read_transaction(runtime.factory) as db:
        row = db.get(SessionLock, (session_id, lock.COMPACTION))
        return row is not None and _aware(row.expires_at) > datetime.now(UTC)


def compaction_rows(runtime: Runtime, session_id: str) -> list[Compaction]:
    with read_transaction(runtime.factory) as db:
        rows = list(
            db.scalars(
                select(Compaction)
                .where(Compaction.session_id == session_id)
                .order_by(Compaction.id)
            )
        )
        db.expunge_all()
        return rows


def compaction_count(runtime: Runtime, session_id: str) -> int:
    with read_transaction(runtime.factory) as db:
        return int(
            db.scalar(select(func.count(Compaction.id)).where(Compaction.session_id == session_id))
            or 0
        )


def settle(runtime: Runtime, session_id: str, *, quiet: float = 0.5, timeout: float = 600) -> float:
    """Wait until no compaction runs and none was recorded for ``quiet`` seconds.

    Only ordinary (baseline) turns wait for this; returns the seconds waited.
    """
    started = time.perf_counter()
    last = (compaction_count(runtime, session_id), time.perf_counter())
    while time.perf_counter() - started < timeout:
        count = compaction_count(runtime, session_id)
        if count != last[0] or compaction_lease_held(runtime, session_id):
            last = (count, time.perf_counter())
        elif time.perf_counter() - last[1] >= quiet:
            break
        time.sleep(0.05)
    return time.perf_counter() - started


# -- turns ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivered:
    """A delivered reply to a question."""

    created_at: datetime
    """When the question was stored."""
    sent_at: datetime
    meta: dict[str, Any]
    kind: str
    """The reply's message kind: ``chat`` (an answer) or ``notice`` (an error notice)."""
    text: str


@dataclass(slots=True)
class TurnRecord:
    """One question addressed to the bot and what its turn cost."""

    phase: str
    uid: str
    session_tokens_before: int
    session_messages_before: int
    compaction_running_at_question: bool
    settled_seconds: float
    accepted_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    latency_ms: float = 0.0
    """Message stored -> reply delivered (database timestamps)."""
    wall_ms: float = 0.0
    """``accept()`` called -> delivery seen by this benchmark (includes polling)."""
    llm_ms: float = 0.0
    prompt_tokens: int = 0
    system_prompt: str = ""
    prompt_text: str = ""
    summary_body: str | None = None
    model_requests: int = 0
    """Chat requests sent for this turn (more than one: overflow recovery retried)."""
    reply_kind: str = ""
    reply_text: str | None = None
    """The text people saw when the reply was not an answer."""
    reply_path_compactions: list[str] = field(default_factory=list)
    """Triggers of compactions the turn applied (hygiene, preflight, overflow)."""
    reply_path_attempts: list[str] = field(default_factory=list)
    """``trigger:outcome`` of every compaction attempt the turn made, applied or not."""
    compactions_during: int = 0

    def public(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "message": self.uid,
            "latency_ms": round(self.latency_ms, 1),
            "wall_ms": round(self.wall_ms, 1),
            "llm_ms": round(self.llm_ms, 1),
            "overhead_ms": round(self.latency_ms - self.llm_ms, 1),
            "prompt_tokens": self.prompt_tokens,
            "model_requests": self.model_requests,
            "stored_session_tokens_before": self.session_tokens_before,
            "session_messages_before": self.session_messages_before,
            "compaction_running_at_question": self.compaction_running_at_question,
            "settled_before_seconds": round(self.settled_seconds, 2),
            "compactions_finished_during_turn": self.compactions_during,
            "compactions_on_reply_path": self.reply_path_compactions,
            "compaction_attempts_on_reply_path": self.reply_path_attempts,
            "reply": self.reply_kind,
            **({"reply_text": self.reply_text} if self.reply_text else {}),
        }

    @property
    def ordinary(self) -> bool:
        """An answered turn with no compaction on its reply path."""
        return self.reply_kind == "chat" and not self.reply_path_attempts


class Bench:
    """The running deployment and what the benchmark recorded."""

    def __init__(self, runtime: Runtime, fake: FakeLLM, attempts: AttemptLog) -> None:
        self.runtime = runtime
        self.fake = fake
        self.attempts = attempts
        self.session_id: str | None = None
        self.turns: list[TurnRecord] = []
        self.peak_tokens = 0
        self.peak_messages = 0
        self.skipped: Counter[str] = Counter()
        self.sent = 0

    def accept(self, line: IrcLine, *, addressed: bool = False) -> int | None:
        try:
            accepted = self.runtime.intake.accept(
                inbound(line, chat_id=CHAT_ID, addressed=addressed)
            )
        except InvalidInput as error:
            self.skipped[type(error).__name__] += 1
            return None
        if accepted is None:
            self.skipped["ignored"] += 1
            return None
        self.sent += 1
        if self.session_id is None:
            self.session_id = accepted.session_id
        if self.sent % SAMPLE_EVERY == 0:
            self.sample()
        return accepted.message_id

    def sample(self) -> None:
        assert self.session_id is not None
        tokens, messages = session_size(self.runtime, self.session_id)
        self.peak_tokens = max(self.peak_tokens, tokens)
        self.peak_messages = max(self.peak_messages, messages)

    def replay(self, lines: Iterable[IrcLine], questions: set[str], rate: float) -> float:
        """Send ``lines`` in order; lines in ``questions`` become ordinary turns."""
        started = time.perf_counter()
        for index, line in enumerate(lines):
            if rate > 0:
                due = started + index / rate
                if (ahead := due - time.perf_counter()) > 0:
                    time.sleep(ahead)
            if line.uid in questions:
                self.ask(line, "day", settle_first=True)
            else:
                self.accept(line)
        return time.perf_counter() - started

    def ask(self, line: IrcLine, phase: str, *, settle_first: bool) -> TurnRecord:
        """Address ``line`` to the bot and wait for the reply to be delivered."""
        assert self.session_id is not None
        sid = self.session_id
        settled = settle(self.runtime, sid) if settle_first else 0.0
        tokens, messages = session_size(self.runtime, sid)
        record = TurnRecord(
            phase=phase,
            uid=line.uid,
            session_tokens_before=tokens,
            session_messages_before=messages,
            compaction_running_at_question=compaction_lease_held(self.runtime, sid),
            settled_seconds=settled,
        )
        started = time.perf_counter()
        message_id = self.accept(line, addressed=True)
        assert message_id is not None
        deadline = started + TURN_TIMEOUT_SECONDS
        while (sent := self._sent(message_id)) is None:
            if time.perf_counter() > deadline:
                raise SystemExit(f"no reply to {line.uid} within {TURN_TIMEOUT_SECONDS}s")
            time.sleep(POLL_SECONDS)
        record.wall_ms = (time.perf_counter() - started) * 1000
        record.reply_path_attempts = [
            f"{a.trigger}:{a.outcome}"
            for a in self.attempts.between(sid, started, time.perf_counter())
            if a.trigger != Trigger.BACKGROUND
        ]
        created, sent_at = sent.created_at, sent.sent_at
        record.accepted_at = created
        record.latency_ms = (sent_at - created).total_seconds() * 1000
        record.llm_ms = float(sent.meta.get("llm_ms", 0.0))
        record.reply_kind = sent.kind
        if sent.kind != "chat":
            record.reply_text = sent.text[:200]
        rows = compaction_rows(self.runtime, sid)
        during = [r for r in rows if created <= _aware(r.created_at) <= sent_at]
        record.compactions_during = len(during)
        record.reply_path_compactions = [
            r.trigger for r in during if r.trigger != Trigger.BACKGROUND
        ]
        requests = self._requests_for(line)
        if not requests:
            raise SystemExit(
                f"the provider never saw the turn for {line.uid}; its reply was "
                f"{sent.kind}: {sent.text[:200]!r}"
            )
        record.model_requests = len(requests)
        messages_sent = requests[-1]["messages"]
        record.prompt_tokens = self.fake.counter.count_messages(messages_sent)
        if messages_sent and messages_sent[0].get("role") == "system":
            record.system_prompt = str(messages_sent[0]["content"])
        record.prompt_text = "\n".join(str(m.get("content") or "") for m in messages_sent)
        for message in messages_sent:
            body = summary_body_sent(message)
            if body is not None:
                record.summary_body = body
        self.turns.append(record)
        return record

    def _sent(self, message_id: int) -> Delivered | None:
        with read_transaction(self.runtime.factory) as db:
            row = db.execute(
                select(
                    Message.created_at,
                    OutboxEntry.sent_at,
                    OutboxEntry.meta,
                    OutboxEntry.reply_message_id,
                    OutboxEntry.text,
                )
                .join(OutboxEntry, OutboxEntry.trigger_message_id == Message.id)
                .where(Message.id == message_id)
            ).first()
            if row is None or row[1] is None:
                return None
            reply = db.get(Message, row[3]) if row[3] is not None else None
            kind = str(reply.kind) if reply is not None else "none"
        return Delivered(_aware(row[0]), _aware(row[1]), dict(row[2] or {}), kind, str(row[4]))

    def _requests_for(self, line: IrcLine) -> list[dict[str, Any]]:
        """The chat requests the fake provider received for the turn answering ``line``."""
        found: list[dict[str, Any]] = []
        for body in self.fake.chat_requests():
            if is_summary_request(body):
                continue
            last = body["messages"][-1] if body.get("messages") else {}
            if str(last.get("content") or "").endswith(line.text):
                found.append(body)
        return found


# -- measurements ---------------------------------------------------------------------------


def summary_body_sent(message: dict[str, Any]) -> str | None:
    """The summary body of a message the provider received, if it carries one.

    The benchmark reads JSON off the wire, where the summary has no type; its body is then
    matched against the ``compactions`` rows, so a look-alike would find no row.
    """
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return None
    if not content.startswith(SUMMARY_PREFIX) or not content.endswith(SUMMARY_END_MARKER):
        return None
    return content[len(SUMMARY_PREFIX) : -len(SUMMARY_END_MARKER)].strip()


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def compaction_report(rows: Sequence[Compaction], replay_started: datetime) -> dict[str, Any]:
    """What the compactions of the replayed session cost, from the ``compactions`` table."""
    listed = []
    for row in rows:
        finished = (_aware(row.created_at) - replay_started).total_seconds()
        listed.append(
            {
                "id": row.id,
                "trigger": row.trigger,
                "strategy": row.strategy,
                "finished_at_s": round(finished, 2),
                "wall_ms": round(row.wall_ms or 0.0, 1),
                "cpu_ms": round(row.cpu_ms or 0.0, 2),
                "tokens_before": row.tokens_before,
                "tokens_after": row.tokens_after,
                "archived": row.archived_count,
                "summary_calls": row.summary_calls,
                "max_summary_request_tokens": row.max_summary_request_tokens,
                "identifiers_carried": len(row.identifiers_carried),
                "identifiers_dropped": len(row.identifiers_dropped),
            }
        )
    return {
        "count": len(rows),
        "by_trigger": dict(Counter(r.trigger for r in rows)),
        "by_strategy": dict(Counter(r.strategy for r in rows)),
        "fallback_used": sum(1 for r in rows if r.fallback_used),
        "cpu_ms": _stats([r.cpu_ms or 0.0 for r in rows]),
        "wall_ms": _stats([r.wall_ms or 0.0 for r in rows]),
        "summary_calls": {
            "total": sum(r.summary_calls for r in rows),
            "max_per_compaction": max((r.summary_calls for r in rows), default=0),
        },
        "tokens_before": _stats([float(r.tokens_before) for r in rows]),
        "tokens_after": _stats([float(r.tokens_after) for r in rows]),
        "archived_messages": sum(r.archived_count for r in rows),
        "list": listed,
    }


def direct_measurement(
    runtime: Runtime, lines: Sequence[IrcLine], runs: int
) -> tuple[dict[str, Any], list[float]]:
    """Manual compactions of a ``len(lines)``-message transcript; undone between runs."""
    intake = Intake(
        runtime.factory,
        runtime.bots,
        runtime.counter,
        runtime.dispatcher,
        max_message_chars=runtime.settings.max_message_chars,
        background=None,  # stored as one block: nothing compacts it before we do
    )
    session_id = None
    for line in lines:
        if not line.text.strip():
            continue  # intake refuses empty messages, as it does in the replay
        accepted = intake.accept(
            inbound(line, chat_id=DIRECT_CHAT_ID, addressed=False, prefix="direct:")
        )
        assert accepted is not None
        session_id = accepted.session_id
    assert session_id is not None
    tokens, count = session_size(runtime, session_id)
    results: list[dict[str, Any]] = []
    for _ in range(runs):
        thread_started = time.thread_time()
        report = runtime.compactor.run(session_id, Trigger.MANUAL)
        thread_cpu = (time.thread_time() - thread_started) * 1000
        if not report.applied:  # e.g. a transcript that fits the protected tail
            results.append({"outcome": report.outcome, "cpu_ms": None})
            break
        with transaction(runtime.factory) as db:
            row = db.get(Compaction, report.compaction_id)
            assert row is not None
            results.append(
                {
                    "outcome": report.outcome,
                    "cpu_ms": row.cpu_ms,
                    "wall_ms": round(row.wall_ms or 0.0, 1),
                    "thread_cpu_ms_whole_run": round(thread_cpu, 1),
                    "strategy": row.strategy,
                    "summary_calls": row.summary_calls,
                    "max_summary_request_tokens": row.max_summary_request_tokens,
                    "tokens_before": row.tokens_before,
                    "tokens_after": row.tokens_after,
                    "archived": row.archived_count,
                    "identifiers_carried": len(row.identifiers_carried),
                }
            )
            chat_session = db.get(ChatSession, session_id, with_for_update=True)
            assert chat_session is not None
            restore_latest(db, chat_session)
    cpu = [float(r["cpu_ms"]) for r in results if r["cpu_ms"] is not None]
    return (
        {
            "transcript_messages": count,
            "transcript_stored_tokens": tokens,
            "trigger": Trigger.MANUAL.value,
            "runs": results,
            "cpu_ms": _stats(cpu),
            "note": (
                "cpu_ms is the compactions row: thread CPU of the compressor, model calls "
                "excluded; thread_cpu_ms_whole_run adds loading, the litellm calls and "
                "applying; the compaction is undone (restore_latest) between runs"
            ),
        },
        cpu,
    )


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def identifier_retention(
    runtime: Runtime, session_id: str, turn: TurnRecord, nicks: set[str]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Identifiers of the turns compacted before ``turn``'s prompt: in it, and findable.

    Also returns, speaker nicks aside, the identifiers that are not in that prompt and all
    of them.

    Identifiers are what ``agent_core.context.identifiers.find_identifiers`` extracts from
    each archived message's stored text (the speaker label the transcript adds is not
    part of it). "Verbatim in the prompt" is a substring test against the whole request
    the model received (system prompt, summary with its ledger, kept tail).
    """
    if turn.summary_body is None:
        return {"compacted_turns": 0, "note": "the prompt carried no summary"}, [], []
    with read_transaction(runtime.factory) as db:
        writer = db.scalar(
            select(Compaction.id)
            .where(Compaction.session_id == session_id, Compaction.summary == turn.summary_body)
            .order_by(Compaction.id.desc())
            .limit(1)
        )
        if writer is None:
            raise SystemExit("the prompt's summary matches no compaction row")
        rows = db.execute(
            select(Message.content, Message.compaction_id)
            .where(
                Message.session_id == session_id,
                Message.archived.is_(True),
                Message.compaction_id <= writer,
            )
            .order_by(Message.anchor_seq, Message.seq)
        ).all()
    per_message = [
        (dict.fromkeys(v for _kind, v in find_identifiers(content or "")), cid)
        for content, cid in rows
    ]
    kinds: dict[str, str] = {}
    for content, _cid in rows:
        for kind, value in find_identifiers(content or ""):
            kinds.setdefault(value, kind.value)
    everything = dict.fromkeys(v for values, _ in per_message for v in values)
    recent_from = len(per_message) - math.ceil(len(per_message) / 5)
    recent = dict.fromkeys(v for values, _ in per_message[recent_from:] for v in values)
    last = [values for values, cid in per_message if cid == writer]
    last_recent = dict.fromkeys(
        v for values in last[len(last) - math.ceil(len(last) / 5) :] for v in values
    )
    prompt = turn.prompt_text
    ledger = set(parse_ledger(turn.summary_body))

    def verbatim(values: Iterable[str]) -> dict[str, Any]:
        values = list(values)
        present = [v for v in values if v in prompt]
        in_ledger = sum(1 for v in values if v in ledger)
        missing = [v for v in values if v not in prompt]
        return {
            "identifiers": len(values),
            "verbatim_in_prompt": len(present),
            "share": _share(len(present), len(values)),
            "via_ledger": in_ledger,
            "via_tail_or_elsewhere": len(present) - sum(1 for v in present if v in ledger),
            "missing_by_kind": dict(Counter(kinds[v] for v in missing)),
            "missing_examples": missing[:8],
        }

    search_started = time.perf_counter()
    findable = 0
    not_found: list[str] = []
    beyond_first_page: list[str] = []
    with read_transaction(runtime.factory) as db:
        repo = CompactionRepository.from_session(db)
        for value in everything:
            hits = repo.search_archive(session_id, value)
            if any(value in (m.content or "") for m in hits):
                findable += 1
                continue
            # SQLite's LIKE ignores ASCII case: the first page may hold only other spellings.
            hits = repo.search_archive(session_id, value, limit=len(rows))
            if any(value in (m.content or "") for m in hits):
                findable += 1
                beyond_first_page.append(value)
            else:
                not_found.append(value)
    search_seconds = time.perf_counter() - search_started
    not_in_prompt = [v for v in everything if v not in prompt and v not in nicks]
    report = {
        "definition": (
            "find_identifiers() over the stored text of every message archived by the "
            "compaction that wrote the prompt's summary or an earlier one; 'verbatim' = "
            "substring of the request the model received; 'findable' = "
            "CompactionRepository.search_archive() returns an archived message containing it"
        ),
        "prompt_of_turn": turn.phase,
        "that_prompt_was_answered": turn.reply_kind == "chat",
        "compacted_turns": len(per_message),
        "compacted_turns_with_identifiers": sum(1 for values, _ in per_message if values),
        "summary_written_by_compaction": writer,
        "distinct_identifiers": len(everything),
        "by_kind": dict(Counter(kinds[v] for v in everything)),
        "identifiers_that_are_speaker_nicks": sum(1 for v in everything if v in nicks),
        "ledger_lines_in_prompt": len(ledger),
        "all": verbatim(everything),
        "most_recent_fifth_of_all_compacted_turns": {
            "turns": len(per_message) - recent_from,
            **verbatim(recent),
        },
        # Nicknames mentioned in chat match the code-identifier patterns, but they name
        # people, not things the issue counts as identifiers.
        "most_recent_fifth_of_all_compacted_turns_without_nicks": {
            "turns": len(per_message) - recent_from,
            **verbatim(v for v in recent if v not in nicks),
        },
        "most_recent_fifth_of_last_compaction": {
            "turns": math.ceil(len(last) / 5),
            **verbatim(last_recent),
        },
        "findable_in_archive": {
            "identifiers": len(everything),
            "findable": findable,
            "share": _share(findable, len(everything)),
            "found_only_beyond_the_default_50_results": len(beyond_first_page),
            "found_only_beyond_examples": beyond_first_page[:8],
            "not_found_examples": not_found[:8],
            "search_seconds": round(search_seconds, 2),
        },
    }
    compacted = [v for v in everything if v not in nicks]
    return report, not_in_prompt, compacted


PROBE = "where in this chat was {value} mentioned?"
PROBE_QUERY = re.compile(r"where in this chat was (?P<value>.+) mentioned\?$")


def search_policy(body: dict[str, Any]) -> ScriptedReply:
    """A model that looks a probed identifier up with ``session_search``, then answers."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "tool":
        return ScriptedReply("Found it in the archive.")
    match = PROBE_QUERY.search(str(last.get("content") or ""))
    if match is None:
        return ScriptedReply("echo")
    return ScriptedReply(None, [tool_call("session_search", {"query": match["value"]})])


def search_every_identifier(
    runtime: Runtime, session_id: str, values: Sequence[str]
) -> dict[str, Any]:
    """Call the ``session_search`` tool itself once for every identifier of the compacted turns.

    The pipeline probes above ask for a sample; this asks for all of them (no model, no
    turn: the tool's own ``call`` in the morning session's context), so a spelling the
    search cannot find (``liveCD`` among hundreds of ``livecd``) does not hide between
    samples.
    """
    with read_transaction(runtime.factory) as db:
        row = db.get(ChatSession, session_id)
        assert row is not None
        ctx = runtime.tools.context(
            runtime.factory, row, user_id="prober", context_length=CONTEXT_LENGTH
        )
    tool = SessionSearchTool()
    lost: list[str] = []
    started = time.perf_counter()
    for value in values:
        hits = json.loads(tool.call({"query": value}, ctx).content).get("results", [])
        if not any(value in str(hit.get("snippet", "")) for hit in hits):
            lost.append(value)
    seconds = time.perf_counter() - started
    return {
        "definition": (
            "for every identifier of the compacted turns (speaker nicks aside), "
            "SessionSearchTool.call(query=identifier) in the morning session; recovered = "
            "a returned snippet holds it verbatim"
        ),
        "identifiers": len(values),
        "recovered": len(values) - len(lost),
        "share": _share(len(values) - len(lost), len(values)),
        "lost_examples": lost[:8],
        "ms_per_search": round(seconds * 1000 / len(values), 2) if values else None,
    }


def search_recovery(
    bench: Bench, missing: Sequence[str], sample: int, compacted: Sequence[str]
) -> dict[str, Any]:
    """Ask the bot, through the real pipeline, for identifiers no longer in its prompt.

    The fake model calls the built-in ``session_search`` with the identifier as the query;
    an identifier counts as recovered when a result the tool returned holds it verbatim.
    The sample is spread evenly over the missing identifiers (most recent compacted turns
    to oldest is not guaranteed: the order is the archive's, oldest first). When none is
    missing (the summary's ledger kept them all), it is drawn from every identifier of
    the compacted turns instead, so that the search is still asked.
    """
    pool = missing or compacted
    if not pool or sample <= 0:
        return {"sampled": 0, "note": "the compacted turns hold no identifier"}
    step = max(1, len(pool) // sample)
    values = list(pool[::step][:sample])
    fake = bench.fake
    fake.policy = search_policy
    recovered: list[str] = []
    lost: list[str] = []
    answered = 0
    try:
        for number, value in enumerate(values):
            line = IrcLine(f"probe/{number}", "prober", PROBE.format(value=value))
            record = bench.ask(line, "search_probe", settle_first=True)
            answered += record.reply_kind == "chat"
            results = [
                str(body["messages"][-1].get("content") or "")
                for body in fake.chat_requests()
                if not is_summary_request(body)
                and body.get("messages")
                and body["messages"][-1].get("role") == "tool"
                and any(str(m.get("content") or "").endswith(line.text) for m in body["messages"])
            ]
            found = False
            for content in results:
                try:
                    hits = json.loads(content).get("results", [])
                except (json.JSONDecodeError, AttributeError):
                    continue
                found = found or any(value in str(hit.get("snippet", "")) for hit in hits)
            (recovered if found else lost).append(value)
    finally:
        fake.policy = None
    return {
        "definition": (
            "a sample of identifiers of compacted turns not in the morning prompt; for each, "
            "a question addressed to the bot, the fake model calls session_search(query="
            "identifier); recovered = a returned snippet holds it verbatim"
        ),
        "not_in_prompt": len(missing),
        "sampled_from": (
            "identifiers not in the prompt"
            if missing
            else "every identifier of the compacted turns (none was missing from the prompt)"
        ),
        "sampled": len(values),
        "recovered": len(recovered),
        "share": _share(len(recovered), len(values)),
        "turns_answered": answered,
        "lost_examples": lost[:8],
    }


def system_prompt_stability(
    turns: Sequence[TurnRecord], rows: Sequence[Compaction]
) -> dict[str, Any]:
    """Whether the system prompt stayed byte-identical between turns with no compaction
    finishing between them (a compaction may rebuild it once)."""
    changes = unexplained = identical_pairs_without_compaction = 0
    for previous, current in itertools.pairwise(turns):
        sent_at = current.accepted_at.timestamp() + current.latency_ms / 1000
        between = [
            r
            for r in rows
            if previous.accepted_at < _aware(r.created_at)
            and _aware(r.created_at).timestamp() <= sent_at
        ]
        if previous.system_prompt != current.system_prompt:
            changes += 1
            if not between:
                unexplained += 1
        elif not between:
            identical_pairs_without_compaction += 1
    return {
        "turns": len(turns),
        "distinct_system_prompts": len({t.system_prompt for t in turns}),
        "changes_between_consecutive_turns": changes,
        "changes_with_no_compaction_between": unexplained,
        "identical_consecutive_pairs_with_no_compaction_between": (
            identical_pairs_without_compaction
        ),
        "compactions_during_the_run": len(rows),
        "stable_between_compactions": unexplained == 0,
    }


# -- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Replay the plan through a fresh deployment and measure; returns the JSON document."""
    wall_started = time.perf_counter()
    probe = speed_probe_ms()
    counter = TokenCounter.for_model("openai/fake-model")
    excerpts = load_corpus(args.corpus)
    plan = plan_replay(
        excerpts,
        counter,
        night_end=args.night_end,
        min_messages=args.messages,
        min_tokens=args.min_tokens,
        day_messages=args.day_messages,
        day_turns=args.day_turns,
        morning_turns=1 + args.followups,
        direct_messages=args.direct_messages,
    )
    windowed = WindowedFakeLLM()
    server = LLMServerThread(windowed)
    server.start()
    fake: FakeLLM = windowed
    fake.delay_per_1k_prompt_tokens = args.ms_per_1k / 1000
    fake.summary_reply = template_summary(args.summary_fill)
    windows = {"fake-model": CONTEXT_LENGTH}
    with tempfile.TemporaryDirectory(prefix="hubbub-long-thread-") as home:
        db_url = f"sqlite:///{Path(home) / 'hubbub.db'}"
        upgrade_to_head(db_url)
        values: dict[str, Any] = {
            "home": home,
            "database_url": db_url,
            "model": "openai/fake-model",
            "llm_api_base": fake.base_url,
            "llm_api_key": "sk-bench",
            "context_length": CONTEXT_LENGTH,
            "worker_metrics_port": 0,
            "log_level": "WARNING",
            # Each question its own measured turn (the default collect mode would merge
            # questions asked while a turn runs).
            "busy_mode": "queue",
            # The probes and the day's questions come faster than the default per-person
            # and per-chat turn limits allow; a limited turn would be a notice, not a reply.
            "rate_limit_user": "off",
            "rate_limit_chat": "off",
        }
        if args.quiet > 0:
            # The quiet hours before the morning, compressed: the sweeper compacts a session
            # that went quiet after growing (HUBBUB_COMPRESSION_IDLE_SECONDS).
            values |= {
                "compression_idle_seconds": args.quiet / 2,
                "sweep_interval_seconds": min(1.0, args.quiet / 4),
            }
        if args.summary_window:
            values |= {
                "compression_model": "openai/fake-summary-model",
                "compression_context_length": args.summary_window,
            }
            windows["fake-summary-model"] = args.summary_window
        if args.enforce_window:
            windowed.windows = windows
        settings = Settings.model_validate(values)
        runtime, runner = build_runtime(settings)
        assert runner is not None, "no broker configured: turns run in-process"
        attempts = AttemptLog(runtime.compactor)
        runner.start()
        try:
            return measure(args, plan, Bench(runtime, fake, attempts), counter, wall_started, probe)
        finally:
            runner.stop(30)
            runtime.close()
            server.stop()


def measure(
    args: argparse.Namespace,
    plan: Plan,
    bench: Bench,
    counter: TokenCounter,
    wall_started: float,
    probe: float,
) -> dict[str, Any]:
    """The phases, then the report (``probe``: the machine's speed probe at the start)."""
    runtime, fake = bench.runtime, bench.fake
    main_model = runtime.models.main()
    summary_model = runtime.models.summary() or main_model
    threshold = compute_threshold_tokens(
        main_model.context_length,
        runtime.settings.compression_threshold,
        main_model.max_output_tokens,
    )
    replay_started = datetime.now(UTC)

    day_seconds = bench.replay(plan.day, plan.day_questions, rate=0.0)
    compactions_after_day = compaction_count(runtime, bench.session_id) if bench.session_id else 0
    night_started = datetime.now(UTC)
    night_seconds = bench.replay(plan.night, set(), rate=args.rate)
    night_ended = datetime.now(UTC)
    assert bench.session_id is not None
    sid = bench.session_id
    bench.sample()
    if args.quiet > 0:
        time.sleep(args.quiet)  # nobody writes: the night is over

    morning = bench.ask(plan.morning[0], "morning", settle_first=False)
    for line in plan.morning[1:]:
        bench.ask(line, "followup", settle_first=True)
    settle(runtime, sid)
    rows = compaction_rows(runtime, sid)
    night_rows = [r for r in rows if _aware(r.created_at) >= night_started]
    in_night = [r for r in night_rows if _aware(r.created_at) <= night_ended]
    nicks = {line.nick for line in (*plan.day, *plan.night)}
    retention, not_in_prompt, compacted = identifier_retention(runtime, sid, morning, nicks)
    recovery = search_recovery(bench, not_in_prompt, args.search_sample, compacted)
    every_search = search_every_identifier(runtime, sid, compacted)
    replay_summary_requests = [b for b in fake.chat_requests() if is_summary_request(b)]

    direct, direct_cpu = direct_measurement(runtime, plan.direct, args.direct_runs)

    all_summary_requests = [b for b in fake.chat_requests() if is_summary_request(b)]
    aux_limit = int(summary_model.context_length * REQUEST_WINDOW_SHARE)

    def largest(bodies: Sequence[dict[str, Any]]) -> int:
        return max((fake.counter.count_messages(b["messages"]) for b in bodies), default=0)

    replay_largest = largest(replay_summary_requests)
    direct_largest = largest(all_summary_requests[len(replay_summary_requests) :])
    planned_largest = max(
        [r.max_summary_request_tokens for r in rows]
        + [int(run.get("max_summary_request_tokens") or 0) for run in direct["runs"]]
    )
    overall_largest = max(replay_largest, direct_largest, planned_largest)

    ordinary_turns = [t for t in bench.turns if t.phase == "followup" and t.ordinary]
    ordinary = statistics.median(t.latency_ms for t in ordinary_turns) if ordinary_turns else None
    ratio = morning.latency_ms / ordinary if ordinary else None
    day_turns = [t for t in bench.turns if t.phase == "day"]
    with transaction(runtime.factory) as db:
        total_messages, stored_total = db.execute(
            select(func.count(Message.id), func.coalesce(func.sum(Message.token_count), 0)).where(
                Message.session_id == sid, Message.role == "user"
            )
        ).one()
    labelled_total = sum(
        counter.count_message({"role": "user", "content": f"[{line.nick}] {line.text}"})
        for line in (*plan.day, *plan.night, *plan.morning)
    )
    cpu_value = max(direct_cpu) if direct_cpu else None
    recent = retention.get("most_recent_fifth_of_all_compacted_turns", {}).get("share")
    recent_things = retention.get("most_recent_fifth_of_all_compacted_turns_without_nicks", {}).get(
        "share"
    )
    last = retention.get("most_recent_fifth_of_last_compaction", {}).get("share")
    findable = retention.get("findable_in_archive", {}).get("share")
    stability = system_prompt_stability(bench.turns, rows)
    night_compaction_ms = sum((r.wall_ms or 0.0) for r in in_night)

    return {
        "benchmark": "long_thread",
        "machine": machine(probe),
        "database": "sqlite (temporary file); embedded runner (in-process thread pool)",
        "corpus": {
            "source": "ubuntu-irc (Kummerfeld et al., ACL 2019; CC-BY-4.0)",
            "path": str(args.corpus),
            "night_excerpts": len(plan.night_excerpts),
            "night_first_excerpt": plan.night_excerpts[0],
            "night_last_excerpt": plan.night_excerpts[-1],
            "day_messages": len(plan.day),
            "night_messages": len(plan.night),
            "morning_questions": len(plan.morning),
            "session_user_messages_stored": int(total_messages),
            "session_speakers": len(nicks),
            "session_user_tokens_stored": int(stored_total),
            "session_user_tokens_as_the_model_sees_them": labelled_total,
            "skipped_messages": dict(bench.skipped),
        },
        "settings": {
            "model": main_model.name,
            "context_length": main_model.context_length,
            "threshold_tokens": threshold,
            "background_line_tokens": background_line(threshold),
            "hygiene_line_tokens": int(
                main_model.context_length * runtime.settings.compression_hygiene_threshold
            ),
            "hard_message_limit": runtime.settings.compression_hard_message_limit,
            "summary_model": summary_model.name,
            "summary_window": summary_model.context_length,
            "summary_request_limit_tokens": aux_limit,
            "worker_concurrency": runtime.settings.worker_concurrency,
            "busy_mode": runtime.settings.busy_mode,
            "turn_rate_limits": "off",
        },
        "fake_provider": {
            "latency_ms_per_1k_prompt_tokens": args.ms_per_1k,
            "enforces_context_window": args.enforce_window,
            "over_window_requests": (
                "answered at once with 400 context_length_exceeded"
                if args.enforce_window
                else "accepted"
            ),
            "runs_in": "this process (aiohttp on its own thread), like bench/pipeline.py",
            "chat_reply": "echo of the last user message",
            "summary_model": (
                "writes the template headings with generic filler prose of about "
                f"{args.summary_fill:.0%} of the request's max_tokens and copies nothing "
                "from the turns (no identifier, no name): identifiers in the prompt come "
                "from Hubbub's ledger or the kept tail only"
            ),
            "requests": len(fake.chat_requests()),
        },
        "replay": {
            "day_seconds": round(day_seconds, 2),
            "night_seconds": round(night_seconds, 2),
            "night_messages_per_second": round(len(plan.night) / night_seconds, 1),
            "night_rate_limit": args.rate or "unpaced",
            "quiet_seconds_before_morning": args.quiet,
            "peak_stored_session_tokens": bench.peak_tokens,
            "peak_session_messages": bench.peak_messages,
            "stayed_under_threshold": bench.peak_tokens < threshold,
            "compactions_during_day": compactions_after_day,
            "compactions_during_night": len(in_night),
            "night_compaction_wall_seconds": round(night_compaction_ms / 1000, 2),
            "night_compaction_wall_share_of_night": _share(
                round(night_compaction_ms), round(night_seconds * 1000)
            ),
            "last_night_compaction_finished_before_night_end_s": (
                round((night_ended - _aware(in_night[-1].created_at)).total_seconds(), 2)
                if in_night
                else None
            ),
            "compaction_running_when_morning_question_arrived": (
                morning.compaction_running_at_question
            ),
        },
        "compactions": compaction_report(rows, replay_started),
        "compaction_attempts": bench.attempts.summary(sid),
        "summary_requests": {
            "replay_requests": len(replay_summary_requests),
            "direct_requests": len(all_summary_requests) - len(replay_summary_requests),
            "largest_replay_request_tokens": replay_largest,
            "largest_direct_request_tokens": direct_largest,
            "largest_request_planning_tokens_recorded": planned_largest,
            "limit_tokens": aux_limit,
            "note": (
                "tokens as the provider counted them (tiktoken over the request); the "
                "planning figure is the compactions row's max_summary_request_tokens "
                "(3 characters per token)"
            ),
        },
        "compressor_cpu_5000_messages": direct,
        "identifier_retention": retention,
        "session_search_recovery": recovery,
        "session_search_of_every_identifier": every_search,
        "latency": {
            "definition": (
                "message stored -> reply delivered (messages.created_at -> outbox.sent_at). "
                "The first morning question is sent the moment the night's last message is "
                "accepted, without waiting for anything. Ordinary = median of the follow-up "
                "turns on the same session (asked after it settled) that were answered with "
                "no compaction attempt on their reply path"
            ),
            "first_reply_after_night_ms": round(morning.latency_ms, 1),
            "first_reply_after_night_kind": morning.reply_kind,
            "ordinary_turn_ms": round(ordinary, 1) if ordinary else None,
            "ordinary_turns_counted": len(ordinary_turns),
            "ratio": round(ratio, 3) if ratio else None,
            "ratio_to_day_turns_median": (
                round(morning.latency_ms / statistics.median(t.latency_ms for t in day_turns), 3)
                if day_turns
                else None
            ),
            "day_turns_ms": _stats([t.latency_ms for t in day_turns]),
            "turns": [t.public() for t in bench.turns],
        },
        "system_prompt": stability,
        "targets": {
            "compressor_cpu_ms_per_5000_message_compaction": {
                "target": f"<= {TARGET_CPU_MS:g}",
                "value": cpu_value,
                "measured_as": "max over the direct runs",
                "met": cpu_value is not None and cpu_value <= TARGET_CPU_MS,
            },
            "largest_summary_request_tokens": {
                "target": f"<= {REQUEST_WINDOW_SHARE:.0%} of {summary_model.context_length}",
                "value": overall_largest,
                "share": _share(overall_largest, summary_model.context_length),
                "met": overall_largest <= aux_limit,
            },
            "identifiers_findable_in_archive": {
                "target": "100%",
                "value": findable,
                "met": findable is not None and findable >= TARGET_FINDABLE,
            },
            "recent_fifth_identifiers_verbatim_in_prompt": {
                "target": f">= {TARGET_RECENT_VERBATIM:.0%}",
                "value_recent_fifth_of_all_compacted_turns": recent,
                "value_recent_fifth_of_all_compacted_turns_without_nicks": recent_things,
                "value_recent_fifth_of_last_compaction": last,
                "met_all_compacted_turns": recent is not None and recent >= TARGET_RECENT_VERBATIM,
                "met_all_compacted_turns_without_nicks": recent_things is not None
                and recent_things >= TARGET_RECENT_VERBATIM,
                "met_last_compaction": last is not None and last >= TARGET_RECENT_VERBATIM,
            },
            "first_reply_after_night_vs_ordinary": {
                "target": f"ratio <= {TARGET_LATENCY_RATIO:.2f}, answered",
                "value": round(ratio, 3) if ratio else None,
                "met": ratio is not None
                and ratio <= TARGET_LATENCY_RATIO
                and morning.reply_kind == "chat",
            },
            "identifiers_recovered_with_session_search": {
                "target": "100%",
                "value": recovery.get("share"),
                "value_every_identifier_direct": every_search.get("share"),
                "met": recovery.get("share") == 1.0 and every_search.get("share") in (1.0, None),
            },
            "system_prompt_identical_between_compactions": {
                "met": stability["stable_between_compactions"],
            },
        },
        "wall_seconds": round(time.perf_counter() - wall_started, 1),
    }


def main() -> None:
    """Run the benchmark and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--night-end", default=NIGHT_END, help="excerpt the night ends with")
    parser.add_argument("--messages", type=int, default=20_000, help="night messages, at least")
    parser.add_argument("--min-tokens", type=int, default=400_000, help="night tokens, at least")
    parser.add_argument("--day-messages", type=int, default=4_000)
    parser.add_argument("--day-turns", type=int, default=8)
    parser.add_argument("--followups", type=int, default=5, help="ordinary turns after the first")
    parser.add_argument("--ms-per-1k", type=float, default=20.0, help="fake latency per 1k tokens")
    parser.add_argument("--summary-fill", type=float, default=0.5)
    parser.add_argument(
        "--summary-window", type=int, default=None, help="a separate summary model's window"
    )
    parser.add_argument("--rate", type=float, default=0.0, help="night messages/s (0: unpaced)")
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.0,
        help="seconds of silence between the night and the morning question (0: none); "
        "quiet-time compaction runs after half of it",
    )
    parser.add_argument(
        "--no-enforce-window",
        dest="enforce_window",
        action="store_false",
        help="let the fake provider accept prompts larger than the model's window",
    )
    parser.add_argument(
        "--search-sample",
        type=int,
        default=20,
        help="identifiers not in the prompt that the bot is asked to find with session_search",
    )
    parser.add_argument("--direct-messages", type=int, default=5_000)
    parser.add_argument("--direct-runs", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(run(args), indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
