"""Turn stored messages into the OpenAI chat transcript the model sees."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from agent_core.context.transcript import SpokenMessage

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
    the thread) can tell who said what; the speaker also travels beside the text (see
    :class:`~agent_core.context.transcript.SpokenMessage`), read from the row.
    """
    return chat_message(
        message.role,
        message.content,
        message.tool_calls,
        message.tool_call_id,
        message.name,
        message.speaker_id,
        message.speaker_name,
        chat_type=chat_type,
    )


def chat_message(
    role: str,
    content: str | None,
    tool_calls: list[dict[str, Any]] | None,
    tool_call_id: str | None,
    name: str | None,
    speaker_id: str | None,
    speaker_name: str | None,
    *,
    chat_type: str,
) -> dict[str, Any]:
    """:func:`to_chat_message` from plain fields.

    The per-turn transcript build unpacks its light rows by position, several times
    faster than named access on each row.
    """
    out: dict[str, Any]
    if role == "user" and chat_type == GROUP:
        out = SpokenMessage(label_of(speaker_name, speaker_id), content or "")
    else:
        out = {"role": role, "content": content}
    if tool_calls:
        out["tool_calls"] = tool_calls
    if tool_call_id:
        out["tool_call_id"] = tool_call_id
    if name:
        out["name"] = name
    return out


def to_chat_messages(messages: Iterable[TranscriptRow], *, chat_type: str) -> list[dict[str, Any]]:
    """Stored messages as a chat transcript, in the given order."""
    return [to_chat_message(m, chat_type=chat_type) for m in messages]
