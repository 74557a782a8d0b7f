"""Read OpenAI chat messages: their text, tool links, speakers and token sizes.

Every phase of the compressor looks at messages through these helpers, so the rules for
"what counts as text", "which call does this result answer" and "who said it" live in one
place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.tokens import rough_message_tokens

Message = Mapping[str, Any]
"""A chat message as the caller holds it; never mutated by the context engine."""
ChatMessage = dict[str, Any]
"""A message the context engine built or rewrote."""

IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})


class SpokenMessage(dict[str, Any]):
    """A group member's message, with its speaker as stored on the message row.

    The text carries a ``[Speaker] `` label for the model; the speaker travels beside it.

    The label is never parsed back: display names hold brackets (``[DEV] alice``,
    ``bob[m]``) and anyone can type ``[Name] `` at the start of a message.
    """

    def __init__(self, speaker: str, text: str) -> None:
        super().__init__(role="user", content=f"[{speaker}] {text}")
        self.speaker = speaker
        self.text = text


def content_text(content: Any) -> str:
    """The text of a message's content; image parts contribute nothing."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part, Mapping):
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
        else:
            texts.append(str(part))
    return "\n".join(texts)


def has_images(message: Message) -> bool:
    """Whether the message's content holds at least one image part."""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    return any(isinstance(p, Mapping) and p.get("type") in IMAGE_PART_TYPES for p in content)


def is_tool_result(message: Message) -> bool:
    """Whether the message answers a tool call."""
    return message.get("role") == "tool"


def is_visible_reply(message: Message) -> bool:
    """An assistant message people saw: it has text, not just tool calls."""
    return message.get("role") == "assistant" and bool(content_text(message.get("content")).strip())


def tool_call_name_and_arguments(call: Mapping[str, Any]) -> tuple[str, str]:
    """The function name and the raw JSON argument string of one tool call."""
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return str(function.get("name") or "tool"), arguments


def tool_calls_by_id(messages: Sequence[Message]) -> dict[str, tuple[str, str]]:
    """Every tool call in the transcript: id -> (function name, argument JSON)."""
    calls: dict[str, tuple[str, str]] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if call.get("id"):
                calls[str(call["id"])] = tool_call_name_and_arguments(call)
    return calls


def speaker_of(message: Message) -> str | None:
    """Who said a user message in a group: the stored speaker, or the message's ``name``."""
    if isinstance(message, SpokenMessage):
        return message.speaker
    if message.get("role") == "user" and message.get("name"):
        return str(message["name"])
    return None


def spoken_text(message: Message) -> str:
    """The text of a message without the speaker label a group transcript adds."""
    content = content_text(message.get("content"))
    if isinstance(message, SpokenMessage):
        label = f"[{message.speaker}] "
        return content[len(label) :] if content.startswith(label) else content
    return content


def message_tokens(
    messages: Sequence[Message], token_counts: Sequence[int] | None = None
) -> list[int]:
    """Per-message token sizes: the caller's cached counts when given, else the rough estimate.

    Raises:
        ValueError: ``token_counts`` does not have one entry per message.
    """
    if token_counts is None:
        return [rough_message_tokens(m) for m in messages]
    if len(token_counts) != len(messages):
        raise ValueError(
            f"token_counts has {len(token_counts)} entries for {len(messages)} messages"
        )
    return list(token_counts)
