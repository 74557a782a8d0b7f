"""All SQL for sessions and their messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Row, bindparam, case, exists, func, select, update
from sqlalchemy.orm import Session, aliased

from agent_core.busy import Waiting, is_stop
from agent_core.db.base import utcnow
from agent_core.db.models import (
    Bot,
    Budget,
    ChatSession,
    Message,
    MessageKind,
    SessionLock,
    Tenant,
    TenantMcpServer,
    TurnState,
)
from agent_core.db.tables import MESSAGES, SESSIONS, param


class SeqAllocation(NamedTuple):
    """A new sequence number and the session's running totals after the update."""

    seq: int
    """The last number handed out (the only one, unless several were asked for)."""
    active_tokens: int
    active_count: int
    stop_seq: int
    """The number of the session's latest ``/stop``: a stop the caller did not know of shows."""
    summary_version: int
    """Bumped by every compaction: one the caller did not know of shows."""


class TurnStart(NamedTuple):
    """What a turn starts on, read in one query (:meth:`SessionRepository.turn_start`)."""

    trigger: Message
    chat_session: ChatSession
    bot_settings: dict[str, Any] | None
    """The bot's settings (its tool allow-list); ``None`` when the bot is gone."""
    tenant: Tenant | None
    """Held here, so the unit of work keeps it (its identity map holds rows weakly)."""
    has_budgets: bool
    has_tenant_servers: bool
    """The tenant has MCP servers of its own."""
    answered_before: bool
    """An assistant message is stored in the message's place: an earlier run's rounds."""


class DrainStart(NamedTuple):
    """What a drain starts on, read in one query (:meth:`SessionRepository.drain_start`)."""

    waiting: list[Waiting]
    own_busy_mode: str | None
    """The bot's own busy mode; ``None`` to inherit."""
    tenant_settings: dict[str, Any]


TRANSCRIPT_COLUMNS = (
    Message.id,
    Message.anchor_seq,
    Message.seq,
    Message.role,
    Message.content,
    Message.tool_calls,
    Message.tool_call_id,
    Message.name,
    Message.speaker_id,
    Message.speaker_name,
    Message.token_count,
)
"""What a transcript row carries, in the order ``build_transcript`` unpacks it."""


_ALLOCATE_SEQ = (
    update(SESSIONS)
    .where(SESSIONS.c.id == param("sid", SESSIONS.c.id))
    .values(
        next_seq=SESSIONS.c.next_seq + param("d_seq", SESSIONS.c.next_seq),
        last_message_at=param("now", SESSIONS.c.last_message_at),
        active_tokens=SESSIONS.c.active_tokens + param("d_tokens", SESSIONS.c.active_tokens),
        active_count=SESSIONS.c.active_count + param("d_count", SESSIONS.c.active_count),
        tokens_spent=SESSIONS.c.tokens_spent + param("d_spent", SESSIONS.c.tokens_spent),
    )
    .returning(
        SESSIONS.c.next_seq,
        SESSIONS.c.active_tokens,
        SESSIONS.c.active_count,
        SESSIONS.c.stop_seq,
        SESSIONS.c.summary_version,
    )
)
_STORED_STATE = select(
    SESSIONS.c.compaction_count,
    SESSIONS.c.ineffective_compactions,
    SESSIONS.c.summary,
    SESSIONS.c.summary_version,
    SESSIONS.c.compaction_cooldown_until,
    SESSIONS.c.last_prompt_tokens,
    SESSIONS.c.context_state,
    SESSIONS.c.next_seq,
    SESSIONS.c.stop_seq,
).where(SESSIONS.c.id == param("sid", SESSIONS.c.id))
_STORED_STATE_LOCKED = _STORED_STATE.with_for_update()
_CLOSE_TURN = (
    update(MESSAGES)
    .where(
        MESSAGES.c.id == param("mid", MESSAGES.c.id),
        MESSAGES.c.turn_state == TurnState.PENDING,
    )
    .values(turn_state=TurnState.DONE)
)
_PENDING = (
    MESSAGES.c.session_id == param("sid", MESSAGES.c.session_id),
    MESSAGES.c.turn_state == TurnState.PENDING,
)
_HAS_PENDING = select(exists().where(*_PENDING))
_CURRENT_SESSION_ID = select(SESSIONS.c.id).where(
    SESSIONS.c.key == param("key", SESSIONS.c.key), SESSIONS.c.is_current.is_(True)
)
_STORED_COPY = select(MESSAGES.c.id, MESSAGES.c.session_id).where(
    MESSAGES.c.bot_id == param("bot", MESSAGES.c.bot_id),
    MESSAGES.c.platform_message_id == param("platform_id", MESSAGES.c.platform_message_id),
)
_EARLIER = aliased(Message)
SESSION_NUMBERS = (
    ChatSession.summary_version,
    ChatSession.next_seq,
    ChatSession.stop_seq,
    ChatSession.compaction_count,
    ChatSession.ineffective_compactions,
    ChatSession.compaction_cooldown_until,
)
"""What others write to a session row while a turn holds the session: intake numbers the
messages that arrive (a ``/stop`` among them), a compaction records its outcome."""

_TURN_START = (
    select(
        Message,
        ChatSession,
        Bot.settings,
        Tenant,
        exists().where(Budget.tenant_id == ChatSession.tenant_id),
        exists().where(TenantMcpServer.tenant_id == ChatSession.tenant_id),
        exists().where(
            _EARLIER.session_id == Message.session_id,
            _EARLIER.anchor_seq == Message.anchor_seq,
            _EARLIER.role == "assistant",
        ),
    )
    .join(ChatSession, ChatSession.id == Message.session_id)
    .outerjoin(Bot, Bot.id == ChatSession.bot_id)
    .outerjoin(Tenant, Tenant.id == ChatSession.tenant_id)
    .where(Message.id == param("mid", MESSAGES.c.id))
)
_DRAIN_START = (
    select(
        Bot.busy_mode,
        Tenant.settings,
        Message.id,
        Message.seq,
        Message.created_at,
        Message.kind,
        Message.meta,
    )
    .select_from(ChatSession)
    .outerjoin(Bot, Bot.id == ChatSession.bot_id)
    .outerjoin(Tenant, Tenant.id == ChatSession.tenant_id)
    .outerjoin(
        Message,
        (Message.session_id == ChatSession.id) & (Message.turn_state == TurnState.PENDING),
    )
    .where(ChatSession.id == param("sid", SESSIONS.c.id))
    .order_by(Message.seq)
    .limit(bindparam("batch"))
)
"""The statements every message and turn runs, built once (see ``agent_core.db.tables``)."""


class SessionRepository:
    """Queries over ``sessions`` and ``messages``; never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> SessionRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def get(self, session_id: str, *, for_update: bool = False) -> ChatSession | None:
        """The session, optionally row-locked for the rest of the transaction."""
        query = select(ChatSession).where(ChatSession.id == session_id)
        if for_update:
            query = query.with_for_update()
        return self.session.scalar(query)

    def get_current_by_key(self, key: str) -> ChatSession | None:
        """The current session for a conversation key, or ``None``."""
        return self.session.scalar(
            select(ChatSession).where(ChatSession.key == key, ChatSession.is_current.is_(True))
        )

    def current_session_id(self, key: str) -> str | None:
        """The current session's id for a conversation key (no row loaded)."""
        return self.session.scalar(_CURRENT_SESSION_ID, {"key": key})

    def list_recent(self, *, limit: int, platform: str | None = None) -> list[ChatSession]:
        """The most recently created sessions, newest first."""
        query = select(ChatSession).order_by(ChatSession.created_at.desc()).limit(limit)
        if platform is not None:
            query = query.where(ChatSession.platform == platform)
        return list(self.session.scalars(query))

    def list_by_key(self, key: str) -> list[ChatSession]:
        """Every session ever held under ``key``, oldest first."""
        return list(
            self.session.scalars(
                select(ChatSession).where(ChatSession.key == key).order_by(ChatSession.created_at)
            )
        )

    def allocate_seq(
        self,
        session_id: str,
        *,
        active_tokens: int = 0,
        active_messages: int = 0,
        spent_tokens: int = 0,
        also: Mapping[str, Any] | None = None,
        count: int = 1,
    ) -> SeqAllocation:
        """The next ``count`` arrival numbers of the session, updating its token counters.

        The UPDATE row-locks the session until commit, so numbers are handed out in
        commit order: a later number is never visible before an earlier one. ``also``
        holds other session columns to set in the same statement. The numbers are the
        ``count`` ending at the returned ``seq``.
        """
        row = self.session.execute(
            _ALLOCATE_SEQ.values(dict(also)) if also else _ALLOCATE_SEQ,
            {
                "sid": session_id,
                "now": utcnow(),
                "d_tokens": active_tokens,
                "d_count": active_messages,
                "d_spent": spent_tokens,
                "d_seq": count,
            },
        ).one()
        return SeqAllocation(*(int(value) for value in row))

    def stored_state(self, session_id: str, *, lock: bool = False) -> Row[*tuple[Any, ...]] | None:
        """Just the engine-state columns and the numbers of a session (not the prompt text).

        ``lock`` row-locks the session until commit (``FOR UPDATE``; SQLite's single
        writer needs none).
        """
        statement = _STORED_STATE_LOCKED if lock else _STORED_STATE
        return self.session.execute(statement, {"sid": session_id}).first()

    def update_columns(self, session_id: str, values: dict[str, Any]) -> None:
        """Set session columns without loading the row."""
        self.session.execute(update(SESSIONS).where(SESSIONS.c.id == session_id).values(values))

    def counters(self, session_id: str) -> tuple[int, int]:
        """The session's running (active tokens, active messages) totals."""
        row = self.session.execute(
            select(ChatSession.active_tokens, ChatSession.active_count).where(
                ChatSession.id == session_id
            )
        ).one()
        return int(row[0]), int(row[1])

    def message_in_session(
        self, session_id: str, message_id: int
    ) -> tuple[Message, ChatSession] | None:
        """A message and its session in one query.

        Both then sit in the ORM session's identity map, so a later ``get`` of either in
        the same transaction costs no round trip.
        """
        row = self.session.execute(
            select(Message, ChatSession)
            .join(ChatSession, ChatSession.id == Message.session_id)
            .where(Message.id == message_id, ChatSession.id == session_id)
        ).first()
        return (row[0], row[1]) if row is not None else None

    def turn_start(self, message_id: int) -> TurnStart | None:
        """A message, its session, its bot's settings and its tenant in one query.

        Also whether the tenant has budgets or MCP servers of its own and whether a reply
        is already stored in the message's place, so a turn without them reads none of
        those tables (the registry needs the bot's allow-list, the compressor the
        tenant's settings: the tenant row is in the unit of work, ``db.get`` is free).
        """
        row = self.session.execute(_TURN_START, {"mid": message_id}).first()
        if row is None:
            return None
        return TurnStart(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]), bool(row[6]))

    def close_turn(self, message_id: int) -> bool:
        """Mark a pending message answered; ``False`` when another run closed it first."""
        result = self.session.execute(_CLOSE_TURN, {"mid": message_id})
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def waiting(
        self, session_id: str, *, limit: int, after_seq: int | None = None
    ) -> list[Waiting]:
        """The oldest messages waiting for a turn (after ``after_seq``), for busy modes."""
        query = select(
            Message.id, Message.seq, Message.created_at, Message.kind, Message.meta
        ).where(Message.session_id == session_id, Message.turn_state == TurnState.PENDING)
        if after_seq is not None:
            query = query.where(Message.seq > after_seq)
        rows = self.session.execute(query.order_by(Message.seq).limit(limit)).all()
        return [_waiting(row) for row in rows]

    def drain_start(self, session_id: str, *, limit: int) -> DrainStart | None:
        """The oldest messages waiting for a turn, with the busy settings that plan them.

        One query: the session's bot's own busy mode and its tenant's settings ride on the
        waiting rows (on one row of nulls when nothing waits). ``None`` for no such session.
        """
        rows = self.session.execute(_DRAIN_START, {"sid": session_id, "batch": limit}).all()
        if not rows:
            return None
        return DrainStart(
            [_waiting(row) for row in rows if row.id is not None],
            rows[0].busy_mode,
            rows[0].settings or {},
        )

    def close_unanswered(self, message_id: int, meta: Mapping[str, Any]) -> bool:
        """Close a waiting message's turn without a reply of its own, noting why in its meta.

        ``False`` (and nothing changed) when another run closed it first.
        """
        if not self.close_turn(message_id):
            return False
        message = self.session.get(Message, message_id)
        if message is not None:
            message.meta = {**(message.meta or {}), **meta}
        return True

    def get_message(self, message_id: int) -> Message | None:
        """The message, or ``None``."""
        return self.session.get(Message, message_id)

    def message_with_replies(self, message: Message) -> list[Message]:
        """A message and the chat replies anchored to it, in transcript order."""
        return list(
            self.session.scalars(
                select(Message)
                .where(
                    Message.session_id == message.session_id,
                    Message.anchor_seq == message.anchor_seq,
                    Message.kind == MessageKind.CHAT,
                    Message.deleted.is_(False),
                )
                .order_by(Message.seq)
            )
        )

    def stored_copy(self, bot_id: int, platform_message_id: str) -> tuple[int, str] | None:
        """(id, session id) of the message a platform knows by this id, if stored."""
        row = self.session.execute(
            _STORED_COPY, {"bot": bot_id, "platform_id": platform_message_id}
        ).first()
        return (int(row[0]), str(row[1])) if row is not None else None

    def get_message_by_platform_id(self, bot_id: int, platform_message_id: str) -> Message | None:
        """The message a platform knows by this id, for this bot."""
        return self.session.scalar(
            select(Message).where(
                Message.bot_id == bot_id, Message.platform_message_id == platform_message_id
            )
        )

    def private_chat_user(self, session_id: str) -> str | None:
        """The person of a private chat: the sender of its first message that names one."""
        return self.session.scalar(
            select(Message.speaker_id)
            .where(
                Message.session_id == session_id,
                Message.role == "user",
                Message.speaker_id.is_not(None),
            )
            .order_by(Message.seq)
            .limit(1)
        )

    def has_pending(self, session_id: str) -> bool:
        """Whether any message of the session waits for a turn."""
        return bool(self.session.scalar(_HAS_PENDING, {"sid": session_id}))

    def tool_rounds(self, session_id: str, anchor_seq: int) -> int:
        """Tool rounds already stored for the turn at ``anchor_seq``.

        A turn that runs again after a crash continues from these, so its calls are
        numbered on from them (see :mod:`agent_core.usage.ledger`). Counted in Python:
        a JSON ``null`` and SQL ``NULL`` differ between the backends.
        """
        query = select(Message.tool_calls).where(
            Message.session_id == session_id,
            Message.anchor_seq == anchor_seq,
            Message.role == "assistant",
        )
        return sum(1 for calls in self.session.scalars(query) if calls)

    def context_rows(
        self, session_id: str, *, up_to_anchor: int | None = None, versioned: bool = False
    ) -> Sequence[Row[Any]]:
        """Active chat messages the model sees, in transcript order, as light rows.

        Only the columns a transcript needs are read (no ORM objects): this runs on every
        turn over the whole active transcript.

        Args:
            session_id: the session.
            up_to_anchor: only messages placed at or before this position (a turn sees
                what arrived before the message it answers, and the replies to it).
            versioned: each row also ends with the session's ``SESSION_NUMBERS`` as this
                very statement saw them, so a caller can tell whether the session row it
                holds still describes the session (see ``SESSION_NUMBERS``).
        """
        columns: tuple[Any, ...] = TRANSCRIPT_COLUMNS
        if versioned:
            columns += SESSION_NUMBERS
        query = select(*columns)
        if versioned:
            query = query.join(ChatSession, ChatSession.id == Message.session_id)
        query = query.where(
            Message.session_id == session_id,
            Message.archived.is_(False),
            Message.deleted.is_(False),
            Message.kind == MessageKind.CHAT,
        )
        if up_to_anchor is not None:
            query = query.where(Message.anchor_seq <= up_to_anchor)
        return self.session.execute(query.order_by(Message.anchor_seq, Message.seq)).all()

    def conversation(
        self, session_ids: Sequence[str], *, limit: int, after_id: int | None = None
    ) -> list[Message]:
        """What people see of sessions: every kind, archived included; the last ``limit``.

        The agent's tool traffic (calls and results) is the model's working, not part of
        the conversation people read: it is left out. ``after_id`` keeps only lines stored
        after that one (ids grow as lines are stored): what a reconnecting page missed.
        """
        query = (
            select(Message)
            .join(ChatSession, ChatSession.id == Message.session_id)
            .where(
                Message.session_id.in_(session_ids),
                Message.deleted.is_(False),
                Message.role != "tool",
            )
            .order_by(ChatSession.created_at.desc(), Message.anchor_seq.desc(), Message.seq.desc())
            .limit(limit)
        )
        if after_id is not None:
            query = query.where(Message.id > after_id)
        return [m for m in reversed(list(self.session.scalars(query))) if not m.tool_calls]

    def triggers_of(self, replies: Sequence[Message]) -> dict[int, int]:
        """The id of the message each reply answers, by reply id.

        A reply is anchored at its trigger, and a message that asks for a turn is its own
        anchor: the trigger is the session's message numbered with the reply's anchor.
        """
        wanted = {(m.session_id, m.anchor_seq): m.id for m in replies if m.role == "assistant"}
        if not wanted:
            return {}
        rows = self.session.execute(
            select(Message.id, Message.session_id, Message.seq).where(
                Message.session_id.in_({session for session, _ in wanted}),
                Message.seq.in_({seq for _, seq in wanted}),
            )
        )
        found: dict[int, int] = {}
        for trigger_id, session_id, seq in rows:
            reply_id = wanted.get((session_id, seq))
            if reply_id is not None and reply_id != trigger_id:
                found[reply_id] = int(trigger_id)
        return found

    def awaits_reply(self, session_ids: Sequence[str]) -> bool:
        """Whether a message of these sessions still waits for its turn to finish."""
        query = select(
            exists().where(
                Message.session_id.in_(session_ids), Message.turn_state == TurnState.PENDING
            )
        )
        return bool(self.session.scalar(query))

    def active_token_total(self, session_id: str) -> int:
        """Sum of the stored token counts of the active chat messages."""
        total = self.session.scalar(
            select(func.coalesce(func.sum(Message.token_count), 0)).where(
                Message.session_id == session_id,
                Message.archived.is_(False),
                Message.deleted.is_(False),
                Message.kind == MessageKind.CHAT,
            )
        )
        return int(total or 0)

    def mark_compaction_checked(self, session_id: str) -> None:
        """Record that the session was looked at, so a quiet one is not looked at again."""
        self.session.execute(
            update(ChatSession)
            .where(ChatSession.id == session_id)
            .values(last_compacted_at=utcnow())
            .execution_options(synchronize_session=False)
        )

    def idle_sessions(
        self,
        *,
        quiet_since: datetime,
        min_tokens: int,
        tenant_min_tokens: Mapping[str, int] | None = None,
        limit: int = 100,
    ) -> list[str]:
        """Current sessions gone quiet that grew since their last compaction.

        Quiet since ``quiet_since``, with ``min_tokens`` or more in active messages (a
        tenant's own line from ``tenant_min_tokens`` for its sessions), and messages after
        their last compaction.
        """
        line: ColumnElement[int] | int = min_tokens
        if tenant_min_tokens:
            line = case(dict(tenant_min_tokens), value=ChatSession.tenant_id, else_=min_tokens)
        query = (
            select(ChatSession.id)
            .where(
                ChatSession.is_current.is_(True),
                ChatSession.last_message_at < quiet_since,
                ChatSession.active_tokens >= line,
                (ChatSession.last_compacted_at.is_(None))
                | (ChatSession.last_compacted_at < ChatSession.last_message_at),
            )
            .limit(limit)
        )
        return list(self.session.scalars(query))

    def sessions_needing_turns(self, *, now: datetime, created_before: datetime) -> list[str]:
        """Sessions with waiting messages and no live turn lease (their drain died or was lost)."""
        live_lease = exists().where(
            SessionLock.session_id == Message.session_id,
            SessionLock.kind == "turn",
            SessionLock.expires_at > now,
        )
        query = (
            select(Message.session_id)
            .where(
                Message.turn_state == TurnState.PENDING,
                Message.created_at < created_before,
                ~live_lease,
            )
            .distinct()
        )
        return list(self.session.scalars(query))


def _waiting(row: Row[Any]) -> Waiting:
    """A waiting message's row (id, seq, created_at, kind, meta) as busy modes see it."""
    return Waiting(
        id=row.id,
        seq=row.seq,
        arrived=row.created_at,
        mergeable=row.kind == MessageKind.CHAT and not (row.meta or {}).get("rate_limited"),
        stop=is_stop(row.kind == MessageKind.COMMAND, row.meta),
    )
