"""The admin API's reads across a tenant's data, every query filtered by tenant."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agent_core.admin.activity import NO_ACTIVITY, BotActivity
from agent_core.db.models import Bot, ChatSession, MemoryEntry, Message, OutboxEntry, Tenant


class AdminRepository:
    """Tenant-scoped lookups: an id of another tenant is never found."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: Session) -> AdminRepository:
        """The repository bound to a unit of work."""
        return cls(session)

    def tenants(self, tenant_id: str | None = None) -> list[Tenant]:
        """Every tenant, or only ``tenant_id``, in id order."""
        query = select(Tenant).order_by(Tenant.id)
        if tenant_id is not None:
            query = query.where(Tenant.id == tenant_id)
        return list(self.session.scalars(query))

    def bots(self, tenant_id: str) -> list[Bot]:
        """The tenant's bots in creation order."""
        return list(
            self.session.scalars(select(Bot).where(Bot.tenant_id == tenant_id).order_by(Bot.id))
        )

    def bot(self, tenant_id: str, bot_id: int) -> Bot | None:
        """The tenant's bot with this id, or ``None``."""
        return self.session.scalar(select(Bot).where(Bot.tenant_id == tenant_id, Bot.id == bot_id))

    def bot_activity(self, bots: Sequence[Bot]) -> dict[int, BotActivity]:
        """Per bot: its newest inbound message, newest reply and newest delivery error.

        Three grouped queries, whatever the number of bots.
        """
        ids = [b.id for b in bots]
        if not ids:
            return {}
        inbound = dict(
            self.session.execute(
                select(Message.bot_id, func.max(Message.created_at))
                .where(Message.bot_id.in_(ids), Message.role == "user")
                .group_by(Message.bot_id)
            ).all()
        )
        newest = select(func.max(OutboxEntry.id)).where(OutboxEntry.bot_id.in_(ids))
        latest = {
            e.bot_id: e
            for e in self.session.scalars(
                select(OutboxEntry).where(
                    OutboxEntry.id.in_(newest.group_by(OutboxEntry.bot_id).scalar_subquery())
                )
            )
        }
        erred = newest.where(OutboxEntry.last_error.is_not(None)).group_by(OutboxEntry.bot_id)
        errors = {
            e.bot_id: e
            for e in self.session.scalars(
                select(OutboxEntry).where(OutboxEntry.id.in_(erred.scalar_subquery()))
            )
        }
        found: dict[int, BotActivity] = {}
        for bot_id in ids:
            reply, error = latest.get(bot_id), errors.get(bot_id)
            if reply is None and bot_id not in inbound:
                found[bot_id] = NO_ACTIVITY
                continue
            found[bot_id] = BotActivity(
                last_inbound_at=inbound.get(bot_id),
                last_delivery_state=reply.state if reply else None,
                last_delivery_at=(reply.sent_at or reply.created_at) if reply else None,
                last_delivery_failed_once=bool(reply and reply.last_error),
                last_error=error.last_error if error else None,
                last_error_at=(error.claimed_at or error.created_at) if error else None,
            )
        return found

    def sessions(
        self, tenant_id: str, *, platform: str | None, chat: str | None, limit: int
    ) -> list[ChatSession]:
        """The tenant's sessions, most recently active first."""
        query = select(ChatSession).where(ChatSession.tenant_id == tenant_id)
        if platform is not None:
            query = query.where(ChatSession.platform == platform)
        if chat is not None:
            query = query.where(ChatSession.chat_id == chat)
        query = query.order_by(
            ChatSession.last_message_at.desc().nulls_last(), ChatSession.id.desc()
        ).limit(limit)
        return list(self.session.scalars(query))

    def session_of(
        self, tenant_id: str, session_id: str, *, for_update: bool = False
    ) -> ChatSession | None:
        """The tenant's session with this id, or ``None``."""
        query = select(ChatSession).where(
            ChatSession.tenant_id == tenant_id, ChatSession.id == session_id
        )
        if for_update:
            query = query.with_for_update()
        return self.session.scalar(query)

    def messages(self, session_id: str, *, limit: int) -> list[Message]:
        """The session's newest ``limit`` stored messages (archived ones too), oldest first."""
        query = (
            select(Message)
            .where(Message.session_id == session_id)
            .order_by(Message.anchor_seq.desc(), Message.seq.desc(), Message.id.desc())
            .limit(limit)
        )
        return list(reversed(list(self.session.scalars(query))))

    def memory(self, tenant_id: str, *, limit: int) -> list[MemoryEntry]:
        """The tenant's memory entries, oldest first."""
        query = (
            select(MemoryEntry)
            .where(MemoryEntry.tenant_id == tenant_id)
            .order_by(MemoryEntry.id)
            .limit(limit)
        )
        return list(self.session.scalars(query))
