"""Turn messages into the labelled, capped, redacted text a summary model reads.

Each message becomes one line: a role label (with the speaker's name in groups, so the
summary can say who said what), then its text as a JSON string, capped at 6,000
characters (the first 4,000 and the last 1,500: a long output's conclusion is usually at
its end) and with secrets removed. Redaction runs over slightly more than is kept, so a
secret cut by the cap is still recognised.

Everything people wrote is quoted: a message (or a display name) that types
``[ASSISTANT]:`` on a new line stays inside its JSON string and never reads as a turn of
its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_core.context.redaction import redact_all
from agent_core.context.summary_prompt import quoted
from agent_core.context.transcript import (
    Message,
    content_text,
    speaker_of,
    spoken_text,
    tool_call_name_and_arguments,
)

MESSAGE_CHAR_CAP = 6_000
MESSAGE_HEAD_CHARS = 4_000
MESSAGE_TAIL_CHARS = 1_500
REDACTION_OVERLAP_CHARS = 256
"""Extra characters redacted beyond each kept part, so a secret split by the cap is caught."""


@dataclass(frozen=True, slots=True)
class CharCap:
    """How much of one message a summary request may quote."""

    total: int = MESSAGE_CHAR_CAP
    head: int = MESSAGE_HEAD_CHARS
    tail: int = MESSAGE_TAIL_CHARS

    def within(self, max_total: int) -> CharCap:
        """This cap shrunk proportionally to at most ``max_total`` characters."""
        if max_total >= self.total:
            return self
        scale = max_total / self.total
        return CharCap(max_total, int(self.head * scale), int(self.tail * scale))


DEFAULT_CAP = CharCap()


def _cut_head(text: str, length: int) -> str:
    """The first ``length`` characters, ending at a word boundary when one is near."""
    if len(text) <= length or text[length].isspace():
        return text[:length]
    space = text.rfind(" ", length - REDACTION_OVERLAP_CHARS, length)
    return text[:space] if space > 0 else text[:length]


def _cut_tail(text: str, length: int) -> str:
    """The last ``length`` characters, starting at a word boundary when one is near."""
    if len(text) <= length:
        return text
    start = len(text) - length
    if text[start - 1].isspace():
        return text[start:]
    space = text.find(" ", start, start + REDACTION_OVERLAP_CHARS)
    return text[space + 1 :] if space != -1 else text[start:]


def capped_redacted(text: str, cap: CharCap = DEFAULT_CAP) -> str:
    """``text`` redacted and, when longer than ``cap.total``, cut to its head and tail.

    Cuts fall on word boundaries where possible, so no half identifier (``etc/app.conf``
    from ``/etc/app.conf``) reaches the summary or the identifier ledger.
    """
    return capped_redacted_all([text], cap)[0]


def capped_redacted_all(texts: Sequence[str], cap: CharCap = DEFAULT_CAP) -> list[str]:
    """:func:`capped_redacted` of each text, redacted as one batch."""
    pieces: list[str] = []
    for text in texts:
        if len(text) <= cap.total:
            pieces.append(text)
        else:
            pieces.append(text[: cap.head + REDACTION_OVERLAP_CHARS])
            pieces.append(text[-(cap.tail + REDACTION_OVERLAP_CHARS) :])
    redacted = iter(redact_all(pieces))
    out: list[str] = []
    for text in texts:
        if len(text) <= cap.total:
            out.append(next(redacted))
            continue
        head = _cut_head(next(redacted), cap.head)
        tail = _cut_tail(next(redacted), cap.tail)
        omitted = len(text) - len(head) - len(tail)
        out.append(f"{head}\n[… {omitted:,} characters omitted …]\n{tail}")
    return out


def message_body(message: Message) -> str:
    """Everything a message says: its text (without a group speaker prefix) and its calls."""
    text = (
        spoken_text(message)
        if message.get("role") == "user"
        else content_text(message.get("content"))
    )
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if calls:
        rendered = []
        for call in calls:
            name, arguments = tool_call_name_and_arguments(call)
            rendered.append(f"{name}({arguments})")
        text = f"{text}\n[calls] " if text else "[calls] "
        text += "; ".join(rendered)
    return text


def turn_label(message: Message, tool_names: Mapping[str, str]) -> str:
    """The role label of one line: ``USER "Alice"``, ``ASSISTANT``, ``TOOL RESULT "grep"``.

    Names come from people and tools, so they are quoted like the text.
    """
    role = str(message.get("role") or "unknown")
    if role == "user":
        speaker = speaker_of(message)
        return f"USER {quoted(speaker)}" if speaker else "USER"
    if role == "tool":
        name = message.get("name") or tool_names.get(str(message.get("tool_call_id") or ""))
        return f"TOOL RESULT {quoted(str(name))}" if name else "TOOL RESULT"
    return "ASSISTANT" if role == "assistant" else quoted(role)


def serialize_turn(
    message: Message,
    tool_names: Mapping[str, str],
    cap: CharCap = DEFAULT_CAP,
    *,
    body: str | None = None,
) -> str:
    """One labelled line for the summary request: ``[label]: "text as JSON"``.

    Args:
        message: the message.
        tool_names: call id -> function name, to label tool results.
        cap: the character cap for the body.
        body: the already capped and redacted body, when the caller has it.
    """
    text = capped_redacted(message_body(message), cap) if body is None else body
    return f"[{turn_label(message, tool_names)}]: {quoted(text)}"
