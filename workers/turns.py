"""The turn pipeline: take a session's waiting messages in order and answer each one.

For each triggering message: restore the frozen prompt, build a fresh agent, call the
model (outside any database transaction), store the reply and its outbox entry in one
transaction, deliver it. A message's reply is unique in the outbox, so a turn that runs
twice (a redelivered task, a worker killed mid-turn) ends with exactly one reply.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session, sessionmaker

from agent_core.agent import Agent, TurnReply
from agent_core.config import Settings
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message, MessageKind
from agent_core.errors import ConfigError, ProviderError
from agent_core.llm.model import ChatModel
from agent_core.memory.repository import MemoryRepository
from agent_core.prompt.builder import PromptInputs
from agent_core.prompt.service import restore_or_build
from agent_core.sessions import lock
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.service import record_reply
from agent_core.sessions.transcript import to_chat_messages
from agent_core.tokens import TokenCounter
from workers import metrics
from workers.commands import CommandContext, run_command
from workers.delivery import DeliveryService
from workers.dispatch import Dispatcher

log = logging.getLogger(__name__)

ModelFactory = Callable[[], ChatModel]

PENDING_BATCH = 20
"""Waiting messages fetched per query while draining a session."""

NO_MODEL_NOTICE = (
    "No model is configured, so I cannot answer yet. The operator needs to set HUBBUB_MODEL "
    "(any litellm model string, e.g. openai/gpt-4o-mini) and the provider's API key "
    "(HUBBUB_LLM_API_KEY or the provider's usual variable), then restart Hubbub."
)


def provider_notice(error: ProviderError) -> str:
    """The short reply a user sees when the model call failed."""
    reason = {
        "ContextOverflow": "the conversation no longer fits the model's context window",
        "ProviderAuthError": "the model provider refused our credentials",
        "ProviderRateLimited": "the model provider is rate-limiting us",
        "ProviderUnavailable": "the model provider is unavailable right now",
    }.get(type(error).__name__, "the model provider rejected the request")
    return f"Sorry, I could not answer: {reason}. Please try again in a moment."


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Everything a turn needs once the database work before the model call is done."""

    message: Message
    chat_session: ChatSession
    system_prompt: str
    transcript: list[dict[str, Any]]


def worker_identity() -> str:
    """A lease owner name that says which process holds it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TurnRunner:
    """Runs turns for sessions; one instance per process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        factory: sessionmaker[Session],
        delivery: DeliveryService,
        model_factory: ModelFactory,
        *,
        stopping: threading.Event,
    ) -> None:
        self._settings = settings
        self._factory = factory
        self._delivery = delivery
        self._model_factory = model_factory
        self._stopping = stopping
        self._counter = TokenCounter.for_model(settings.model)
        self._context_files: tuple[tuple[str, str], ...] | None = None
        self.dispatcher: Dispatcher | None = None

    def drain(self, session_id: str) -> int:
        """Answer the session's waiting messages in arrival order; returns how many.

        Only the holder of the session's turn lease works; anyone else returns at once,
        and the holder looks for new messages again after releasing, so none is stranded.
        """
        processed = 0
        lease = self._settings.turn_lease_seconds
        while True:
            owner = worker_identity()
            with lock.held(self._factory, session_id, lock.TURN, owner, lease) as keeper:
                if keeper is None:
                    return processed
                while not self._stopping.is_set():
                    batch = self._pending(session_id)
                    if not batch:
                        break
                    for message_id in batch:
                        if self._stopping.is_set():
                            break
                        self.run_turn(message_id)
                        processed += 1
            if not self._has_pending(session_id):
                return processed
            if self._stopping.is_set():
                if self.dispatcher is not None:
                    self.dispatcher.kick_session(session_id)
                return processed

    def _pending(self, session_id: str) -> list[int]:
        with transaction(self._factory) as db:
            return SessionRepository.from_session(db).pending_message_ids(
                session_id, limit=PENDING_BATCH
            )

    def _has_pending(self, session_id: str) -> bool:
        with transaction(self._factory) as db:
            return SessionRepository.from_session(db).has_pending(session_id)

    def run_turn(self, message_id: int) -> None:
        """Answer one message (idempotent: a message already answered is left alone)."""
        started = time.perf_counter()
        outbox_id, prepared = self._before_model(message_id)
        llm_seconds = 0.0
        if prepared is not None:
            reply, notice = self._call_model(prepared)
            if reply is not None:
                llm_seconds = reply.llm_seconds
                outbox_id = self._store_reply(prepared, reply.text, MessageKind.CHAT, reply)
                metrics.TURNS.labels("reply").inc()
            else:
                outbox_id = self._store_reply(prepared, notice, MessageKind.NOTICE, None)
                metrics.TURNS.labels("provider_error").inc()
        if outbox_id is not None:
            self._delivery.deliver(outbox_id)
        elapsed = time.perf_counter() - started
        metrics.TURN_SECONDS.observe(elapsed)
        metrics.TURN_OVERHEAD_SECONDS.observe(max(elapsed - llm_seconds, 0.0))

    def _before_model(self, message_id: int) -> tuple[int | None, _Prepared | None]:
        # Not waited to disk (see _store_reply); a lost prompt build is simply redone.
        with transaction(self._factory, durable=False) as db:
            repo = SessionRepository.from_session(db)
            loaded = repo.load_turn(message_id)
            if loaded is None:
                return None, None
            message, chat_session, persona = loaded
            if message.kind == MessageKind.COMMAND:
                text = self._command_reply(db, chat_session, message)
                metrics.TURNS.labels("command").inc()
                return self._record(db, chat_session, message, text, MessageKind.COMMAND), None
            try:
                model = self._model_factory()
            except ConfigError:
                metrics.TURNS.labels("config_error").inc()
                metrics.ERRORS.labels("no_model").inc()
                notice = self._record(
                    db, chat_session, message, NO_MODEL_NOTICE, MessageKind.NOTICE
                )
                return notice, None
            inputs = self._prompt_inputs(chat_session, model, persona)
            system_prompt = restore_or_build(
                db,
                chat_session,
                inputs,
                self._today(),
                load_memory=lambda: MemoryRepository.from_session(db).snapshot(
                    chat_session.tenant_id, chat_session.bot_id
                ),
            )
            transcript = to_chat_messages(
                repo.context_rows(chat_session.id, up_to_anchor=message.anchor_seq),
                chat_type=chat_session.chat_type,
            )
        self._delivery.typing(chat_session)
        return None, _Prepared(message, chat_session, system_prompt, transcript)

    def _record(
        self,
        db: Session,
        chat_session: ChatSession,
        message: Message,
        text: str,
        kind: MessageKind,
        reply: TurnReply | None = None,
    ) -> int | None:
        meta: dict[str, Any] = {}
        if reply is not None:
            meta = {"model": reply.model, "llm_ms": round(reply.llm_seconds * 1000, 3)}
        return record_reply(
            db,
            chat_session,
            message,
            text,
            counter=self._counter,
            kind=kind,
            usage=reply.usage if reply is not None else None,
            meta=meta,
        )

    def _call_model(self, prepared: _Prepared) -> tuple[TurnReply | None, str]:
        """The model's reply, or ``None`` and the notice to send instead."""
        agent = Agent(self._model_factory(), system_prompt=prepared.system_prompt)
        try:
            reply = agent.respond(prepared.transcript)
        except ProviderError as error:
            metrics.ERRORS.labels(type(error).__name__).inc()
            log.warning(
                "model call failed",
                extra={
                    "session_id": prepared.chat_session.id,
                    "error": type(error).__name__,
                    "status": error.status_code,
                    "reason": error.message,
                },
            )
            return None, provider_notice(error)
        metrics.LLM_SECONDS.observe(reply.llm_seconds)
        if reply.usage is not None:
            metrics.LLM_TOKENS.labels("prompt").inc(reply.usage.prompt_tokens)
            metrics.LLM_TOKENS.labels("completion").inc(reply.usage.completion_tokens)
        return reply, ""

    def _store_reply(
        self, prepared: _Prepared, text: str, kind: MessageKind, reply: TurnReply | None
    ) -> int | None:
        # Not waited to disk: if a crash loses it, the message is still pending and its turn
        # runs again; the durable delivery claim that follows flushes it first, so a reply
        # is never sent for a turn the database forgot.
        with transaction(self._factory, durable=False) as db:
            return self._record(db, prepared.chat_session, prepared.message, text, kind, reply)

    def _command_reply(self, db: Session, chat_session: ChatSession, message: Message) -> str:
        name = str(message.meta.get("command", ""))
        try:
            context_length: int | None = self._model_factory().context_length
        except ConfigError:
            context_length = None
        ctx = CommandContext(
            db=db,
            chat_session=chat_session,
            message=message,
            args=str(message.meta.get("command_args", "")),
            context_length=context_length,
        )
        return run_command(name, ctx)

    def _prompt_inputs(
        self, chat_session: ChatSession, model: ChatModel, persona: str | None
    ) -> PromptInputs:
        return PromptInputs(
            persona=persona or self._settings.persona,
            model=model.name,
            platform=chat_session.platform,
            chat_type=chat_session.chat_type,
            session_id=chat_session.id,
            context_length=model.context_length,
            instructions=self._settings.instructions,
            context_files=self._load_context_files(),
            timezone=self._settings.timezone,
        )

    def _load_context_files(self) -> tuple[tuple[str, str], ...]:
        if self._context_files is None:
            self._context_files = tuple(
                (Path(path).name, Path(path).read_text(encoding="utf-8", errors="replace"))
                for path in self._settings.context_files
            )
        return self._context_files

    def _today(self) -> date:
        return datetime.now(ZoneInfo(self._settings.timezone)).date()
