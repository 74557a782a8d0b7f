"""Memory scopes and limits: who may write which facts, and which prompts they reach.

A ``user`` fact belongs to the person whose message led to it and reaches only that
person's private chats with the bot; a ``chat`` fact belongs to the chat (a group with all
its threads, or one private chat). In a group no one's ``user`` facts are ever read, so
nothing said in private leaks to the group. Writes are durable at once; prompts freeze a
snapshot, so the running session sees them only after its next compaction or ``/new``.

Functions take the unit of work first; they flush, never commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_core.config import DEFAULT_MEMORY_MAX_ENTRIES, DEFAULT_MEMORY_MAX_ENTRY_CHARS
from agent_core.db.models import MemoryEntry, MemoryScope
from agent_core.errors import InvalidInput
from agent_core.memory.repository import MAX_SNAPSHOT_ENTRIES, MemoryRepository
from agent_core.sessions.transcript import GROUP


def chat_scope_key(tenant_id: str, bot_id: int, platform: str, chat_id: str) -> str:
    """The key of a chat's memory: shared by all threads of a group."""
    return f"{tenant_id}/{bot_id}/{platform}/{chat_id}"


@dataclass(frozen=True, slots=True)
class MemoryPlace:
    """Where memory is read or written: one chat of a bot, and the person speaking in it."""

    tenant_id: str
    bot_id: int
    chat_key: str
    chat_type: str
    user_id: str | None
    """The person answered (in a private chat, its only person); ``None`` if unknown."""

    @property
    def is_group(self) -> bool:
        """Several people read this chat."""
        return self.chat_type == GROUP


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """How much one scope may hold."""

    max_entry_chars: int = DEFAULT_MEMORY_MAX_ENTRY_CHARS
    max_entries: int = DEFAULT_MEMORY_MAX_ENTRIES


def snapshot(db: Session, place: MemoryPlace) -> list[str]:
    """What a prompt built now for ``place`` freezes, oldest first.

    Private chat: the person's facts, the chat's facts, the bot's community facts.
    Group: the group's facts and the community facts, never anyone's personal facts.
    """
    rows = MemoryRepository.from_session(db).entries(
        place.tenant_id,
        place.bot_id,
        user_id=None if place.is_group else place.user_id,
        chat_key=place.chat_key,
        include_bot_wide=True,
        limit=MAX_SNAPSHOT_ENTRIES,
    )
    return [row.content for row in rows]


def _scope_entries(db: Session, place: MemoryPlace, scope: MemoryScope) -> list[MemoryEntry]:
    repo = MemoryRepository.from_session(db)
    if scope is MemoryScope.USER:
        return repo.entries(place.tenant_id, place.bot_id, user_id=_user(place))
    return repo.entries(place.tenant_id, place.bot_id, chat_key=place.chat_key)


def _user(place: MemoryPlace) -> str:
    if place.user_id is None:
        raise InvalidInput("nobody is known in this chat to remember this about; use scope 'chat'")
    return place.user_id


def _clean(content: str, limits: MemoryLimits) -> str:
    text = " ".join(content.split())
    if not text:
        raise InvalidInput("the memory entry is empty")
    if len(text) > limits.max_entry_chars:
        raise InvalidInput(
            f"a memory entry holds at most {limits.max_entry_chars} characters; this one has "
            f"{len(text)}. Shorten it to the fact itself."
        )
    return text


def _one_match(entries: list[MemoryEntry], needle: str, scope: MemoryScope) -> MemoryEntry:
    wanted = " ".join(needle.split()).casefold()
    if not wanted:
        raise InvalidInput("say which entry: old_text is empty")
    found = [entry for entry in entries if wanted in entry.content.casefold()]
    if not found:
        raise InvalidInput(f"no {scope} memory entry contains {needle!r}")
    if len(found) > 1:
        raise InvalidInput(
            f"{len(found)} {scope} memory entries contain {needle!r}; use a longer old_text "
            "that matches only one"
        )
    return found[0]


def add(
    db: Session, place: MemoryPlace, scope: MemoryScope, content: str, limits: MemoryLimits
) -> MemoryEntry | None:
    """Remember ``content``; ``None`` when the scope holds it already.

    Raises:
        InvalidInput: empty or too long, the scope is full, or no person is known.
    """
    text = _clean(content, limits)
    entries = _scope_entries(db, place, scope)
    if any(entry.content.casefold() == text.casefold() for entry in entries):
        return None
    if len(entries) >= limits.max_entries:
        raise InvalidInput(
            f"the {scope} memory is full ({limits.max_entries} entries); replace or remove an "
            "entry first"
        )
    return MemoryRepository.from_session(db).add(
        place.tenant_id,
        text,
        bot_id=place.bot_id,
        scope=scope,
        subject=_user(place) if scope is MemoryScope.USER else None,
        chat_key=place.chat_key if scope is MemoryScope.CHAT else None,
        author_id=place.user_id,
    )


def replace(
    db: Session,
    place: MemoryPlace,
    scope: MemoryScope,
    old_text: str,
    content: str,
    limits: MemoryLimits,
) -> MemoryEntry:
    """Rewrite the one entry of the scope that contains ``old_text``.

    Raises:
        InvalidInput: no entry or several match, or the new text is empty or too long.
    """
    text = _clean(content, limits)
    entry = _one_match(_scope_entries(db, place, scope), old_text, scope)
    entry.content = text
    entry.author_id = place.user_id
    db.flush()
    return entry


def remove(db: Session, place: MemoryPlace, scope: MemoryScope, old_text: str) -> str:
    """Forget the one entry of the scope that contains ``old_text``; returns its text.

    Raises:
        InvalidInput: no entry or several match.
    """
    entry = _one_match(_scope_entries(db, place, scope), old_text, scope)
    MemoryRepository.from_session(db).delete([entry.id])
    return entry.content


def about_you(db: Session, place: MemoryPlace) -> list[MemoryEntry]:
    """What ``/memory`` lists: private chat, your facts and the chat's; group, the group's.

    A group listing is posted to the group, so personal facts never appear in it.
    """
    return MemoryRepository.from_session(db).entries(
        place.tenant_id,
        place.bot_id,
        user_id=None if place.is_group else place.user_id,
        chat_key=place.chat_key,
    )


def forget(db: Session, place: MemoryPlace, text: str = "") -> int:
    """``/forget [text]``: remove what the bot remembers about you here; returns how many.

    Private chat: your facts and the chat's. Group: the group facts your messages led to
    (others' stay). With ``text``, only entries containing it (any case).
    """
    entries = about_you(db, place)
    if place.is_group:
        entries = [e for e in entries if place.user_id is not None and e.author_id == place.user_id]
    wanted = " ".join(text.split()).casefold()
    if wanted:
        entries = [e for e in entries if wanted in e.content.casefold()]
    return MemoryRepository.from_session(db).delete([e.id for e in entries])
