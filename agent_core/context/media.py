"""Replace images from earlier turns with short text placeholders.

An old screenshot costs hundreds of tokens (and megabytes of base64) on every later
request while the model has long since said what it saw; the placeholder keeps the fact
that an image was there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.context.transcript import IMAGE_PART_TYPES, ChatMessage, Message, has_images

IMAGE_PLACEHOLDER = "[image from an earlier turn omitted]"


def without_images(message: Message) -> ChatMessage | None:
    """A copy of ``message`` whose image parts are placeholders; ``None`` if it has none."""
    if not has_images(message):
        return None
    parts: list[Any] = []
    for part in message["content"]:
        if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES:
            parts.append({"type": "text", "text": IMAGE_PLACEHOLDER})
        else:
            parts.append(part)
    return {**message, "content": parts}


def strip_historical_media(messages: Sequence[Message]) -> dict[int, ChatMessage]:
    """Placeholders for every image before the latest user message that has one.

    The latest image a user sent is what they are asking about, so it and everything
    after it stay intact.

    Returns:
        Index -> rewritten message, for the messages that changed.
    """
    anchor = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].get("role") == "user" and has_images(messages[i])
        ),
        None,
    )
    if anchor is None:
        return {}
    rewritten: dict[int, ChatMessage] = {}
    for index in range(anchor):
        replaced = without_images(messages[index])
        if replaced is not None:
            rewritten[index] = replaced
    return rewritten
