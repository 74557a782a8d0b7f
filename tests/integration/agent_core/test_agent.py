"""The agent loop at the library level: every branch of ``Agent.run`` on a real database.

Models are in-process doubles (the HTTP path through litellm is covered by the pipeline
tests); the database is real SQLite and Postgres.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import event, update
from sqlalchemy.orm import Session, sessionmaker

from agent_core import notices
from agent_core.agent import Agent, AgentServices, TurnEnd, TurnRequest
from agent_core.busy import STOP_COMMAND
from agent_core.compaction.runner import Compactor
from agent_core.compaction.triggers import Trigger
from agent_core.config import CompressionSettings, Settings
from agent_core.context import (
    CompressionOutcome,
    CompressionResult,
    ContextEngine,
    EngineState,
    register_engine,
)
from agent_core.context.registry import _ENGINES
from agent_core.crypto import CredentialBox
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, MessageKind, OutboxEntry
from agent_core.errors import ConfigError, ContextOverflow, ProviderUnavailable
from agent_core.llm.costs import CostTable
from agent_core.llm.model import ChatModel
from agent_core.llm.models import ModelSet
from agent_core.media.repository import ImageReference
from agent_core.prompt.assembler import PromptAssembler
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import Conversation, IncomingMessage, record_incoming
from agent_core.tenancy.repository import TenancyRepository
from agent_core.tokens import TokenCounter
from agent_core.tools.kit import ToolKit
from agent_core.usage import Budgets, UsageLedger, UsageServices
from tests.unit.agent_core.context.scripted import Reply, ScriptedModel

pytestmark = pytest.mark.integration

COUNTER = TokenCounter("cl100k_base")
SMALL_WINDOW = 20_000
"""Threshold and hygiene line are both 17,000 tokens here (the small-window guard)."""
PAST_THRESHOLD = 250
"""Messages of 150 words that take a 128k session past its 64k threshold (not its hygiene
line when that is at 99 %)."""


class ArchivingEngine(ContextEngine):
    """Archives the oldest message on every compaction: always applied while any is left."""

    name = "test-archiving"

    def compress(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        token_counts: Sequence[int] | None = None,
    ) -> CompressionResult:
        state = self.state
        self._state = replace(
            state,
            compression_count=state.compression_count + 1,
            summary_version=state.summary_version + 1,
        )
        return CompressionResult(
            CompressionOutcome.COMPRESSED,
            list(messages[1:]),
            tuple(range(1, len(messages))),
            archived_indices=(0,),
        )

    def has_content_to_compress(
        self, messages: Sequence[Mapping[str, Any]], *, token_counts: Sequence[int] | None = None
    ) -> bool:
        return len(messages) > 1


def _archiving_engine(
    settings: CompressionSettings,
    *,
    model: ChatModel,
    summary_model: ChatModel | None = None,
    state: EngineState | None = None,
) -> ContextEngine:
    return ArchivingEngine(settings, context_length=model.context_length, state=state)


@pytest.fixture
def archiving_engine() -> Iterator[str]:
    """The test engine, registered for one test only (the registry is process-wide)."""
    saved = dict(_ENGINES)
    register_engine(ArchivingEngine.name, _archiving_engine)
    yield ArchivingEngine.name
    _ENGINES.clear()
    _ENGINES.update(saved)


class Harness:
    """A private chat, the agent's services around scripted models, and a turn runner."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        replies: list[Reply] | None = None,
        context_length: int = 128_000,
        prompt_tokens: int | None = None,
        no_model: bool = False,
        tools: bool = False,
        max_iterations: int = 8,
        metered: bool = False,
        **settings: Any,
    ) -> None:
        self.factory = factory
        self.main = ScriptedModel(
            "scripted/main",
            context_length=context_length,
            replies=replies or [],
            default="ok",
            prompt_tokens=prompt_tokens,
        )
        self.summary = ScriptedModel("scripted/aux", context_length=128_000)
        self.settings = Settings.model_validate({"model": "scripted/main", **settings})

        def main() -> ChatModel:
            if no_model:
                raise ConfigError("no model")
            return self.main

        models = ModelSet(self.settings, main=main, summary=lambda: self.summary)
        prompts = PromptAssembler(self.settings)
        compactor = Compactor(self.settings.compression, factory, COUNTER, models, prompts)
        kit = None
        if tools:
            box = CredentialBox(Fernet.generate_key())
            kit = ToolKit(self.settings.tool_settings, configured=[], box=box)
        costs = CostTable(self.settings.model_prices)
        usage = UsageServices(UsageLedger(factory, costs), Budgets(costs)) if metered else None
        self.services = AgentServices(
            factory,
            COUNTER,
            models,
            prompts,
            compactor,
            tools=kit,
            max_iterations=max_iterations,
            usage=usage,
        )
        with transaction(factory) as db:
            bot = TenancyRepository(db).ensure_bot("default", "webchat", "default", settings={})
            self.conversation = Conversation("default", bot.id, "webchat", "c1")
        self._count = 0

    def say(
        self, text: str, *, triggers: bool = True, images: tuple[ImageReference, ...] = ()
    ) -> int:
        self._count += 1
        with transaction(self.factory) as db:
            result = record_incoming(
                db,
                IncomingMessage(
                    self.conversation,
                    text,
                    str(self._count),
                    "u1",
                    "Ann",
                    triggers=triggers,
                    images=images,
                ),
                COUNTER,
            )
        self.session_id = result.session_id
        return result.message_id

    def chatter(self, n: int, words: int = 40) -> None:
        for i in range(n):
            self.say(f"line {i}: " + "context words " * words, triggers=False)

    def turn(self, message_id: int, **request_fields: Any) -> tuple[Any, Any, Agent]:
        """Run the message's turn and store its reply; ``request_fields`` go to the request."""
        with transaction(self.factory) as db:
            message = db.get(Message, message_id)
            assert message is not None
            request = TurnRequest(
                message.session_id, message.id, message.anchor_seq, **request_fields
            )
        agent = Agent(self.services, request)
        outcome = agent.run()
        with transaction(self.factory) as db:
            message = db.get(Message, message_id)
            assert message is not None
            stored = agent.finish(db, message, outcome)
        return outcome, stored, agent

    def session(self) -> ChatSession:
        with transaction(self.factory) as db:
            chat_session = SessionRepository.from_session(db).get(self.session_id)
            assert chat_session is not None
            db.expunge(chat_session)
            return chat_session

    def outbox(self, outbox_id: int) -> OutboxEntry:
        with transaction(self.factory) as db:
            entry = db.get(OutboxEntry, outbox_id)
            assert entry is not None
            db.expunge(entry)
            return entry


def test_a_reply_is_stored_with_its_outbox_entry_and_the_prompt_frozen(factory):
    h = Harness(factory, replies=["hello Ann"])
    outcome, stored, _ = h.turn(h.say("hi"))
    assert outcome.end is TurnEnd.REPLY
    assert outcome.text == "hello Ann"
    assert outcome.compactions == ()
    assert h.outbox(stored.outbox_id).text == "hello Ann"
    prompt = h.session().system_prompt
    assert prompt
    assert h.main.calls[0].messages[0] == {"role": "system", "content": prompt}
    h.turn(h.say("again"))
    assert h.main.calls[1].messages[0]["content"] == prompt


def test_a_turn_reads_its_bot_with_the_message_and_numbers_its_reply_in_one_update(factory):
    """The per-turn overhead: no separate read of the bot row for the tool registry, and
    the reply's engine-state judgement goes in the session UPDATE that numbers it."""
    h = Harness(factory, tools=True, replies=["hello Ann"], prompt_tokens=1_234)
    message_id = h.say("hi")
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(" ".join(statement.split()))

    engine = factory.kw["bind"]
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        request = TurnRequest(message.session_id, message.id, message.anchor_seq)
    event.listen(engine, "before_cursor_execute", seen)
    try:
        agent = Agent(h.services, request)
        outcome = agent.run()
        assert not [s for s in statements if re.search(r"\bFROM bots\b", s)]
        del statements[:]
        with transaction(factory) as db:
            found = agent.reply_rows(db)
            assert found is not None
            stored = agent.finish(db, found[0], outcome, found[1])
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert stored.outbox_id is not None
    assert len([s for s in statements if s.startswith("UPDATE sessions")]) == 1
    reads = [s for s in statements if s.startswith("SELECT")]
    message_reads = [s for s in reads if re.search(r"\bFROM messages\b", s)]
    assert message_reads == [], "the session row, read under its lock, shows no /stop"
    assert len([s for s in reads if re.search(r"\bFROM sessions\b", s)]) == 1
    assert h.outbox(stored.outbox_id).text == "hello Ann"
    assert h.session().last_prompt_tokens == 1_234


class StatementLog:
    """The statements a block runs on the test engine, each with its transaction's number."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self._engine = factory.kw["bind"]
        self.transactions = 0
        self.statements: list[tuple[int, str]] = []

    def _began(self, conn: Any) -> None:
        self.transactions += 1

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append((self.transactions, " ".join(statement.split())))

    def __enter__(self) -> StatementLog:
        event.listen(self._engine, "begin", self._began)
        event.listen(self._engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self._engine, "before_cursor_execute", self._seen)
        event.remove(self._engine, "begin", self._began)

    def at(self, pattern: str) -> list[int]:
        """The transaction numbers of the statements matching ``pattern``, in order."""
        return [number for number, flat in self.statements if re.search(pattern, flat)]


LOOKS = r"\bFROM messages\b.*\bturn_state\b"
TRANSCRIPT_READS = r"\bFROM messages\b.*\barchived\b"


@pytest.mark.parametrize("behind", ["nothing", "message", "stop", "stop during the call"])
def test_a_plain_turn_reads_waiting_messages_only_when_one_could_stop_it(factory, behind):
    """The session row, read with the transcript, tells whether anything behind the message
    could stop the turn (outside the interrupt mode only a ``/stop`` can); only then does the
    first safe point read the waiting messages. So does the last, as the reply is stored:
    the session row, read there under its lock, says whether to look."""
    h = Harness(factory, replies=["hello"])
    message_id = h.say("hi")
    if behind == "message":
        h.say("and one more thing", triggers=False)
    elif behind == "stop":
        stop_id = _stop(h)
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        request = TurnRequest(message.session_id, message.id, message.anchor_seq)
    with StatementLog(factory) as log:
        agent = Agent(h.services, request)
        outcome = agent.run()
        looks, transcript_reads = log.at(LOOKS), log.at(TRANSCRIPT_READS)
        if behind == "stop":
            assert looks == transcript_reads[:1], "the first look is read with the transcript"
            assert outcome.end is TurnEnd.INTERRUPTED
            assert outcome.interrupted is not None
            assert outcome.interrupted.by == stop_id
            assert h.main.calls == [], "stopped before the call"
            return
        assert looks == [], "no /stop behind the message: nothing to look at"
        if behind == "stop during the call":
            stop_id = _stop(h)
        with transaction(factory) as db:
            found = agent.reply_rows(db)
            assert found is not None
            stored = agent.finish(db, found[0], outcome, found[1])
            reply_transaction = log.transactions
    assert outcome.end is TurnEnd.REPLY
    if behind == "stop during the call":
        assert stored.outbox_id is None, "the stopped turn's reply is not sent"
        assert stored.stopped is not None
        assert stored.stopped.interrupted is not None
        assert stored.stopped.interrupted.by == stop_id
        assert log.at(LOOKS) == [reply_transaction], "looked at as the reply was stored"
        return
    assert stored.outbox_id is not None
    assert log.at(LOOKS) == [], "nor as the reply is stored"


def test_a_turn_started_on_its_workers_read_sees_what_arrived_since(factory):
    """The worker reads the turn and hands that read to the agent (no second query); a
    ``/stop`` stored in between still stops the turn before its call."""
    h = Harness(factory, replies=["hello"])
    message_id = h.say("hi")
    with transaction(factory) as db:
        start = SessionRepository.from_session(db).turn_start(message_id)
    assert start is not None
    stop_id = _stop(h)  # arrives while the worker opens its stream
    request = TurnRequest(start.chat_session.id, message_id, start.trigger.anchor_seq, start=start)
    outcome = Agent(h.services, request).run()
    assert outcome.end is TurnEnd.INTERRUPTED
    assert outcome.interrupted is not None
    assert outcome.interrupted.by == stop_id
    assert h.main.calls == [], "stopped before the call"


def _stop(h: Harness) -> int:
    """Store a ``/stop`` in the harness's chat, as the platforms do."""
    with transaction(h.factory) as db:
        result = record_incoming(
            db,
            IncomingMessage(
                h.conversation,
                "/stop",
                "stop-1",
                "u1",
                "Ann",
                is_command=True,
                meta={"command": STOP_COMMAND},
            ),
            COUNTER,
        )
    return result.message_id


def test_a_tenant_without_budgets_is_looked_up_once_with_the_transcript(factory):
    """No transaction of its own for the budget check, none for warnings after the call."""
    h = Harness(factory, replies=["hello"], metered=True)
    message_id = h.say("hi")
    with StatementLog(factory) as log:
        _, stored, _ = h.turn(message_id)
    assert h.outbox(stored.outbox_id).text == "hello"
    assert log.at(r"\bFROM budgets\b") == log.at(TRANSCRIPT_READS)[:1]


def test_a_turn_reads_its_tenant_budgets_servers_and_earlier_rounds_with_its_first_query(
    factory,
):
    """A tenant without budgets or MCP servers of its own, a message not answered before:
    none of those tables is read by a query of its own (the first query says so)."""
    with transaction(factory) as db:
        TenancyRepository.from_session(db).ensure_default_tenant()  # as the migration does
    h = Harness(factory, replies=["hello"], metered=True, tools=True)
    message_id = h.say("hi")
    with StatementLog(factory) as log:
        _, stored, _ = h.turn(message_id)
    assert h.outbox(stored.outbox_id).text == "hello"
    starts = [
        flat
        for _, flat in log.statements
        if "FROM messages JOIN sessions" in flat and not re.search(TRANSCRIPT_READS, flat)
    ]
    assert len(starts) == 1, "the turn's first query: its message and session"
    first = starts[0]
    for table in ("tenants", "budgets", "mcp_servers"):
        assert re.search(rf"\b{table}\b", first), table
        assert not log.at(rf"^SELECT {table}\."), f"{table} read again"
    assert not log.at(r"^SELECT messages\.tool_calls FROM"), "no earlier rounds counted"


def test_a_session_that_never_had_images_reads_no_media(factory):
    h = Harness(factory, replies=["hello", "a cat"])
    with StatementLog(factory) as log:
        h.turn(h.say("hi"))
        assert log.at(r"\bFROM media\b") == []
        h.turn(h.say("look", images=(ImageReference("file-1", "cat.png"),)))
    assert log.at(r"\bFROM media\b"), "a session with an image reads its media"
    assert h.session().has_media
    assert "cat.png" in str(h.main.calls[-1])


def test_a_turn_answered_twice_keeps_the_first_reply(factory):
    h = Harness(factory, replies=["first", "second"])
    message_id = h.say("hi")
    _, stored, _ = h.turn(message_id)
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        request = TurnRequest(message.session_id, message.id, message.anchor_seq)
    agent = Agent(h.services, request)
    outcome = agent.run()
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        again = agent.finish(db, message, outcome)
    assert again.outbox_id is None
    assert h.outbox(stored.outbox_id).text == "first"


def test_hygiene_compacts_a_session_over_the_message_limit_before_the_call(factory):
    h = Harness(factory, compression_hard_message_limit=10)
    h.chatter(14, words=400)
    outcome, _, _ = h.turn(h.say("what did we decide?"))
    assert [r.trigger for r in outcome.compactions] == [Trigger.HYGIENE]
    assert outcome.compactions[0].applied
    assert h.summary.calls, "the summary model wrote the summary"
    sent = h.main.calls[-1].messages
    assert len(sent) < 16
    assert h.session().compaction_count == 1


def test_preflight_compacts_when_the_request_would_cross_the_threshold(factory):
    h = Harness(factory, compression_hygiene_threshold=0.99)
    h.chatter(PAST_THRESHOLD, words=150)
    outcome, _, _ = h.turn(h.say("summarise please"))
    assert [r.trigger for r in outcome.compactions] == [Trigger.PREFLIGHT]
    assert outcome.compactions[0].applied
    assert outcome.end is TurnEnd.REPLY


def test_the_anti_thrashing_warning_is_shown_once(factory):
    h = Harness(factory, prompt_tokens=70_000, compression_hygiene_threshold=0.99)
    h.chatter(PAST_THRESHOLD, words=150)
    h.say("first")
    with transaction(factory) as db:
        db.execute(
            update(ChatSession)
            .where(ChatSession.id == h.session_id)
            .values(ineffective_compactions=2)
        )
    first, _, _ = h.turn(h.say("question one"))
    second, _, _ = h.turn(h.say("question two"))
    assert first.notices == (notices.INEFFECTIVE,)
    assert second.notices == ()
    assert first.compactions == second.compactions == ()


def test_an_overflow_compacts_and_retries(factory):
    overflow = ContextOverflow("scripted/main", "prompt is too long", 400)
    h = Harness(factory, replies=[overflow, "fits now"])
    h.chatter(60, words=150)
    outcome, stored, _ = h.turn(h.say("still there?"))
    assert outcome.end is TurnEnd.REPLY
    assert outcome.text == "fits now"
    assert [r.trigger for r in outcome.compactions] == [Trigger.OVERFLOW]
    assert outcome.errors == (overflow,)
    assert len(h.main.calls[1].messages) < len(h.main.calls[0].messages)
    assert h.outbox(stored.outbox_id).text == "fits now"


def test_an_overflow_with_nothing_left_to_compact_tells_the_user(factory):
    overflow = ContextOverflow("scripted/main", "prompt is too long", 400)
    h = Harness(factory, replies=[overflow, overflow])
    outcome, stored, _ = h.turn(h.say("x " * 100))
    assert outcome.end is TurnEnd.PROVIDER_ERROR
    assert outcome.text == notices.OVERFLOW_STUCK
    assert not outcome.compactions[0].applied
    assert h.outbox(stored.outbox_id).text == notices.OVERFLOW_STUCK


def test_an_overflow_with_compaction_disabled_compacts_nothing(factory):
    overflow = ContextOverflow("scripted/main", "prompt is too long", 400)
    h = Harness(factory, replies=[overflow], compression_enabled=False)
    h.chatter(30)
    outcome, _, _ = h.turn(h.say("hello?"))
    assert outcome.text == notices.OVERFLOW_DISABLED
    assert outcome.compactions == ()
    assert h.session().compaction_count == 0


def test_an_overflow_that_keeps_coming_stops_after_three_recoveries(factory, archiving_engine):
    overflow = ContextOverflow("scripted/main", "prompt is too long", 400)
    h = Harness(factory, replies=[overflow] * 5, compression_engine=archiving_engine)
    h.chatter(10)
    outcome, _, _ = h.turn(h.say("and now?"))
    assert outcome.text == notices.OVERFLOW_STUCK
    assert len(h.main.calls) == 4
    assert [r.trigger for r in outcome.compactions] == [Trigger.OVERFLOW] * 3


def test_a_provider_failure_becomes_a_notice_the_model_never_sees(factory):
    down = ProviderUnavailable("scripted/main", "upstream is down", 503)
    h = Harness(factory, replies=[down])
    outcome, stored, _ = h.turn(h.say("hi"))
    assert outcome.end is TurnEnd.PROVIDER_ERROR
    assert outcome.kind is MessageKind.NOTICE
    assert outcome.text == notices.provider_notice(down)
    assert h.outbox(stored.outbox_id).text == outcome.text
    h.turn(h.say("again"))
    contents = [m.get("content") for m in h.main.calls[-1].messages]
    assert outcome.text not in contents


def test_without_a_model_the_user_is_told_what_to_set(factory):
    h = Harness(factory, no_model=True)
    outcome, stored, _ = h.turn(h.say("hi"))
    assert outcome.end is TurnEnd.NO_MODEL
    assert h.outbox(stored.outbox_id).text == notices.NO_MODEL


def test_real_usage_over_the_threshold_asks_for_a_compaction_later(factory):
    h = Harness(
        factory,
        context_length=SMALL_WINDOW,
        prompt_tokens=18_000,
        compression_hygiene_threshold=0.99,
    )
    _, stored, _ = h.turn(h.say("hi"))
    assert stored.compact_later
    assert h.session().last_prompt_tokens == 18_000


def test_usage_measured_before_a_concurrent_compaction_is_discarded(factory):
    h = Harness(factory)
    message_id = h.say("hi")
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        request = TurnRequest(message.session_id, message.id, message.anchor_seq)
    agent = Agent(h.services, request)
    outcome = agent.run()
    with transaction(factory) as db:
        db.execute(
            update(ChatSession)
            .where(ChatSession.id == h.session_id)
            .values(summary_version=ChatSession.summary_version + 1)
        )
    with transaction(factory) as db:
        message = db.get(Message, message_id)
        assert message is not None
        stored = agent.finish(db, message, outcome)
    assert stored.outbox_id is not None
    assert not stored.compact_later
    assert h.session().last_prompt_tokens == 0


def test_a_summary_model_too_small_for_any_request_is_told_not_retried_forever(factory):
    """A setting that fails every turn is answered once with the fix, not raised again and
    again by each sweep while the person waits for nothing."""
    h = Harness(factory, replies=["never sent"])
    h.summary = ScriptedModel("scripted/aux", context_length=2048)
    outcome, stored, _ = h.turn(h.say("hello?"))
    assert outcome.end is TurnEnd.NO_MODEL
    assert "HUBBUB_COMPRESSION_CONTEXT_LENGTH" in outcome.text
    assert stored.outbox_id is not None
    assert not h.main.calls
