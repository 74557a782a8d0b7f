"""Turn stored messages into the OpenAI chat transcript the model sees."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

GROUP = "group"


class TranscriptRow(Protocol):
    """The fields of a stored message a transcript needs (an ORM object or a light row)."""

    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None
    speaker_id: str | None
    speaker_name: str | None


def speaker_label(message: TranscriptRow) -> str:
    """How a speaker is named in a group transcript."""
    return label_of(message.speaker_name, message.speaker_id)


def label_of(speaker_name: str | None, speaker_id: str | None) -> str:
    """The name shown for a speaker: display name, else platform id, else "someone"."""
    return speaker_name or speaker_id or "someone"


def group_line(text: str | None, speaker_name: str | None, speaker_id: str | None) -> str:
    """A group user message as the model sees it: ``[Speaker] text``."""
    return f"[{label_of(speaker_name, speaker_id)}] {text or ''}"


def to_chat_message(message: TranscriptRow, *, chat_type: str) -> dict[str, Any]:
    """One stored message as an OpenAI chat message.

    In groups, user messages carry the speaker's name so the model (and any summary of
    the thread) can tell who said what.
    """
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "user" and chat_type == GROUP:
        out["content"] = group_line(message.content, message.speaker_name, message.speaker_id)
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def to_chat_messages(messages: Iterable[TranscriptRow], *, chat_type: str) -> list[dict[str, Any]]:
    """Stored messages as a chat transcript, in the given order."""
    return [to_chat_message(m, chat_type=chat_type) for m in messages]
