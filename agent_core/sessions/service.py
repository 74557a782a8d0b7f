"""Session business logic: resolve a conversation, record what arrives, record replies.

Functions take the unit of work (a SQLAlchemy session) first; they flush, never commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agent_core.busy import is_stop
from agent_core.db.base import utcnow
from agent_core.db.models import (
    ChatSession,
    Message,
    MessageKind,
    OutboxState,
    TurnState,
)
from agent_core.db.tables import MESSAGES, OUTBOX, SESSIONS
from agent_core.llm.model import Usage
from agent_core.media.repository import (
    MEDIA_META_KEY,
    ImageReference,
    MediaRepository,
    new_media_ids,
)
from agent_core.sessions.repository import SessionRepository
from agent_core.sessions.transcript import group_line
from agent_core.tokens import TokenCounter

PRIVATE = "private"
GROUP = "group"

_INSERT_MESSAGE = insert(MESSAGES).returning(MESSAGES.c.id)
_INSERT_OUTBOX = insert(OUTBOX).returning(OUTBOX.c.id)
"""Built once, executed with a row of values (see ``agent_core.db.tables``)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """Where a message was said: the parts of a session key."""

    tenant_id: str
    bot_id: int
    platform: str
    chat_id: str
    thread_id: str = ""
    chat_type: str = PRIVATE

    @property
    def key(self) -> str:
        """The session key: one current session per key."""
        return f"{self.tenant_id}/{self.bot_id}/{self.platform}/{self.chat_id}/{self.thread_id}"


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message as the session store needs it, free of any platform type."""

    conversation: Conversation
    text: str
    platform_message_id: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    triggers: bool = True
    """Whether it asks for a turn; group chatter that does not address the bot does not."""
    is_command: bool = False
    reply_to_platform_id: str | None = None
    meta: dict[str, Any] | None = None
    images: tuple[ImageReference, ...] = ()
    """Recorded as ``media`` rows (fetched later by the worker); the message names their ids."""


@dataclass(frozen=True, slots=True)
class RecordResult:
    """What recording an incoming message did."""

    message_id: int
    session_id: str
    duplicate: bool
    """The platform had sent it before; nothing new was stored."""
    triggers: bool
    active_tokens: int = 0
    """The session's active transcript size after this message (0 for duplicates)."""
    active_count: int = 0
    message_tokens: int = 0


def get_or_create_session(db: Session, conversation: Conversation) -> ChatSession:
    """The conversation's current session, created on first contact."""
    repo = SessionRepository.from_session(db)
    current = repo.get_current_by_key(conversation.key)
    if current is not None:
        return current
    try:
        with db.begin_nested():
            current = _new_session(conversation)
            db.add(current)
    except IntegrityError:
        # Another request created it between our read and insert.
        current = repo.get_current_by_key(conversation.key)
        assert current is not None
    return current


def _new_session(conversation: Conversation) -> ChatSession:
    return ChatSession(
        id=uuid.uuid4().hex,
        tenant_id=conversation.tenant_id,
        bot_id=conversation.bot_id,
        key=conversation.key,
        platform=conversation.platform,
        chat_id=conversation.chat_id,
        thread_id=conversation.thread_id,
        chat_type=conversation.chat_type,
        is_current=True,
        next_seq=0,
    )


def start_new_session(db: Session, conversation: Conversation) -> ChatSession:
    """End the current session (kept, with its transcript) and make a fresh one current."""
    repo = SessionRepository.from_session(db)
    current = repo.get_current_by_key(conversation.key)
    if current is not None:
        current.is_current = False
        current.ended_at = utcnow()
        db.flush()
    fresh = _new_session(conversation)
    db.add(fresh)
    db.flush()
    return fresh


def record_incoming(db: Session, incoming: IncomingMessage, counter: TokenCounter) -> RecordResult:
    """Store a message once: a second copy with the same platform id changes nothing.

    Raises:
        sqlalchemy.exc.IntegrityError: a concurrent copy of the same platform message was
            stored between the duplicate check and the insert; the caller rolls back and
            calls again, which then finds the copy.
    """
    conversation = incoming.conversation
    repo = SessionRepository.from_session(db)
    if incoming.platform_message_id is not None:
        copy = repo.stored_copy(conversation.bot_id, incoming.platform_message_id)
        if copy is not None:
            return RecordResult(*copy, True, False)
    session_id = repo.current_session_id(conversation.key)
    if session_id is None:
        chat_session = get_or_create_session(db, conversation)
        session_id = chat_session.id
        if chat_session.next_seq == 0 and conversation.thread_id and incoming.reply_to_platform_id:
            _seed_thread(db, chat_session, incoming.reply_to_platform_id)
    kind = MessageKind.COMMAND if incoming.is_command else MessageKind.CHAT
    tokens = _user_tokens(
        counter, incoming.text, incoming.sender_name, incoming.sender_id, conversation.chat_type
    )
    chat = kind == MessageKind.CHAT
    images = incoming.images if chat else ()
    also: dict[str, Any] = {}
    if images:
        also["has_media"] = True
    if is_stop(incoming.is_command, incoming.meta):
        also["stop_seq"] = SESSIONS.c.next_seq + 1  # the number handed out below
    allocation = repo.allocate_seq(
        session_id,
        active_tokens=tokens if chat else 0,
        active_messages=int(chat),
        also=also or None,
    )
    seq = allocation.seq
    meta = dict(incoming.meta or {})
    media_ids = new_media_ids(len(images))
    if media_ids:
        meta[MEDIA_META_KEY] = media_ids
    message_id = _insert_message(
        db,
        session_id=session_id,
        bot_id=conversation.bot_id,
        seq=seq,
        anchor_seq=seq,
        role="user",
        kind=kind,
        speaker_id=incoming.sender_id,
        speaker_name=incoming.sender_name,
        content=incoming.text,
        platform_message_id=incoming.platform_message_id,
        reply_to_platform_id=incoming.reply_to_platform_id,
        turn_state=TurnState.PENDING if incoming.triggers else TurnState.NONE,
        token_count=tokens,
        token_encoding=counter.encoding_name,
        meta=meta,
    )
    if media_ids:
        MediaRepository.from_session(db).add_pending(
            ids=media_ids,
            images=images,
            tenant_id=conversation.tenant_id,
            session_id=session_id,
            message_id=message_id,
        )
    return RecordResult(
        int(message_id),
        session_id,
        False,
        incoming.triggers,
        allocation.active_tokens,
        allocation.active_count,
        tokens if chat else 0,
    )


def _user_tokens(
    counter: TokenCounter,
    text: str,
    speaker_name: str | None,
    speaker_id: str | None,
    chat_type: str,
) -> int:
    """A user message's tokens as the model will see it (with its speaker in groups)."""
    content = group_line(text, speaker_name, speaker_id) if chat_type == GROUP else text
    return counter.count_message({"role": "user", "content": content})


def _insert_message(db: Session, **values: Any) -> int:
    """Insert one message row (one round trip, no ORM object); returns its id."""
    row = {"archived": False, "deleted": False, "created_at": utcnow(), **values}
    return int(db.execute(_INSERT_MESSAGE, row).scalar_one())


def _seed_thread(db: Session, thread: ChatSession, root_platform_id: str) -> None:
    """Start a new thread session with the message it grew from and the bot's answer to it.

    A reply to a channel message often opens a thread (Slack does this for every answer);
    without its root the thread's first follow-up would reach the model with no context.
    The copies are context only: no platform id of their own, no turn.
    """
    repo = SessionRepository.from_session(db)
    root = repo.get_message_by_platform_id(thread.bot_id, root_platform_id)
    if root is None or root.session_id == thread.id:
        return
    for original in repo.message_with_replies(root):
        allocation = repo.allocate_seq(
            thread.id, active_tokens=original.token_count, active_messages=1
        )
        _insert_message(
            db,
            session_id=thread.id,
            bot_id=thread.bot_id,
            seq=allocation.seq,
            anchor_seq=1,
            role=original.role,
            kind=MessageKind.CHAT,
            speaker_id=original.speaker_id,
            speaker_name=original.speaker_name,
            content=original.content,
            turn_state=TurnState.NONE,
            token_count=original.token_count,
            token_encoding=original.token_encoding,
            meta={"copied_from": original.id},
        )


def record_edit(
    db: Session, bot_id: int, platform_message_id: str, text: str, counter: TokenCounter
) -> Message | None:
    """Replace a stored message's text after the user edited it; ``None`` if unknown."""
    repo = SessionRepository.from_session(db)
    message = repo.get_message_by_platform_id(bot_id, platform_message_id)
    if message is None:
        return None
    chat_session = repo.get(message.session_id)
    assert chat_session is not None
    if message.role == "user":
        tokens = _user_tokens(
            counter, text, message.speaker_name, message.speaker_id, chat_session.chat_type
        )
    else:
        tokens = counter.count_message({"role": message.role, "content": text})
    if _counts_as_active(message):
        chat_session.active_tokens += tokens - message.token_count
    message.content = text
    message.token_count = tokens
    message.token_encoding = counter.encoding_name
    message.edited_at = utcnow()
    db.flush()
    return message


def record_delete(db: Session, bot_id: int, platform_message_id: str) -> Message | None:
    """Drop a message from the transcript after the user deleted it; ``None`` if unknown."""
    repo = SessionRepository.from_session(db)
    message = repo.get_message_by_platform_id(bot_id, platform_message_id)
    if message is None or message.deleted:
        return message
    if _counts_as_active(message):
        chat_session = repo.get(message.session_id)
        assert chat_session is not None
        chat_session.active_tokens -= message.token_count
        chat_session.active_count -= 1
    message.deleted = True
    if message.turn_state == TurnState.PENDING:
        message.turn_state = TurnState.DONE
    db.flush()
    return message


def _counts_as_active(message: Message) -> bool:
    return message.kind == MessageKind.CHAT and not message.archived and not message.deleted


def record_reply(
    db: Session,
    chat_session: ChatSession,
    trigger: Message,
    text: str,
    *,
    counter: TokenCounter,
    kind: MessageKind = MessageKind.CHAT,
    usage: Usage | None = None,
    meta: dict[str, Any] | None = None,
    notices: Sequence[str] = (),
    session_values: Callable[[Row[Any]], Mapping[str, Any]] | None = None,
    locked_state: Row[Any] | None = None,
) -> int | None:
    """Close the trigger's turn, store the reply and queue its delivery, all or nothing.

    ``notices`` (a compaction warning) are shown to people above the reply but never
    become part of the transcript the model sees. ``session_values`` is given the
    session's stored engine state, read under the row lock (``locked_state`` when the
    caller read it so in this unit of work), and the columns it returns are set by the
    same ``UPDATE`` that numbers the reply (one statement, not two).

    Returns the outbox id, or ``None`` when the turn was already closed by another run
    (a redelivered task, or a worker that outlived its lease): that run's reply stands.
    """
    repo = SessionRepository.from_session(db)
    if not repo.close_turn(trigger.id):
        return None
    tokens = counter.count_message({"role": "assistant", "content": text})
    chat = kind == MessageKind.CHAT
    also: Mapping[str, Any] = {}
    if session_values is not None:
        stored = locked_state or repo.stored_state(chat_session.id, lock=True)
        if stored is not None:
            also = session_values(stored)
    seq = repo.allocate_seq(
        chat_session.id,
        active_tokens=tokens if chat else 0,
        active_messages=int(chat),
        spent_tokens=(usage.prompt_tokens + usage.completion_tokens) if usage else 0,
        also=also,
    ).seq
    now = utcnow()
    reply_id = _insert_message(
        db,
        session_id=chat_session.id,
        bot_id=chat_session.bot_id,
        seq=seq,
        anchor_seq=trigger.anchor_seq,
        role="assistant",
        kind=kind,
        content=text,
        turn_state=TurnState.NONE,
        token_count=tokens,
        token_encoding=counter.encoding_name,
        meta=meta or {},
        created_at=now,
    )
    outbox_id = db.execute(
        _INSERT_OUTBOX,
        {
            "session_id": chat_session.id,
            "bot_id": chat_session.bot_id,
            "trigger_message_id": trigger.id,
            "reply_message_id": reply_id,
            "platform": chat_session.platform,
            "chat_id": chat_session.chat_id,
            "thread_id": chat_session.thread_id,
            "reply_to_platform_id": trigger.platform_message_id,
            "text": "\n\n".join([*notices, text]),
            "state": OutboxState.PENDING,
            "attempts": 0,
            "platform_message_ids": [],
            "meta": {"chat_type": chat_session.chat_type, **(meta or {})},
            "created_at": now,
        },
    ).scalar_one()
    return int(outbox_id)
