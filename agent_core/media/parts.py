"""Put stored images into the transcript a model call sends, by reference, at the last moment.

Stored messages hold only text; their images are rows of ``media``. Every transcript read
says in words which images a message carried (``[image: photo.jpg, 1280x720]``), so
models without vision, the compressor and its summaries know an image was there without
ever seeing its bytes. For a vision model the latest user message with images carries
them as OpenAI image parts (a ``data:`` URL built from the stored bytes); images of
earlier messages stay notes, the rule :func:`agent_core.context.media.strip_historical_media`
applies to transcripts that come with images of their own.
"""

from __future__ import annotations

import base64
import copy
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_core.db.models import MediaState
from agent_core.media.repository import ImageInfo
from agent_core.tokens import TokenCounter

ChatMessage = dict[str, Any]


def image_note(info: ImageInfo) -> str:
    """What the text of a message says about one of its images."""
    if info.state == MediaState.REFUSED:
        return f"[image {info.filename} could not be included: {info.reason or 'unavailable'}]"
    if info.width and info.height:
        return f"[image: {info.filename}, {info.width}x{info.height}]"
    return f"[image: {info.filename}]"


def data_url(content_type: str, data: bytes) -> str:
    """The image as a ``data:`` URL, the form every OpenAI-compatible provider accepts."""
    return f"data:{content_type};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(content_type: str, data: bytes) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part."""
    return {"type": "image_url", "image_url": {"url": data_url(content_type, data)}}


def _with_notes(text: str | None, notes: Sequence[str]) -> str:
    body = text or ""
    joined = " ".join(notes)
    if not joined:
        return body
    return f"{body}\n{joined}" if body.strip() else f"{body}{joined}"


def _attachable(infos: Sequence[ImageInfo]) -> list[ImageInfo]:
    return [i for i in infos if i.state == MediaState.READY and i.content_type]


def with_images(
    messages: Sequence[ChatMessage],
    ids: Sequence[int | None],
    token_counts: Sequence[int],
    infos: Sequence[ImageInfo],
    *,
    vision: bool,
    load_blobs: Callable[[Sequence[str]], Mapping[str, bytes]],
    counter: TokenCounter,
) -> tuple[list[ChatMessage], list[int]]:
    """The transcript with its images as notes, and as image parts where a model can see them.

    Args:
        messages: the transcript, one entry per stored message (``ids``) or summary.
        ids: the stored message of each entry (``None`` for the summary).
        token_counts: the stored counts of each entry.
        infos: the images of these messages.
        vision: whether the model reads images.
        load_blobs: reads the bytes of ready images by id (only called when needed).
        counter: recounts the messages that changed (an image part costs a fixed
            estimate, never its base64 as text).

    Returns:
        New lists; messages without images are the same objects as before.
    """
    by_message: dict[int, list[ImageInfo]] = defaultdict(list)
    for info in infos:
        by_message[info.message_id].append(info)
    out = list(messages)
    counts = list(token_counts)
    if not by_message:
        return out, counts
    shown = _latest_with_images(messages, ids, by_message) if vision else None
    blobs: Mapping[str, bytes] = {}
    if shown is not None:
        message_id = ids[shown]
        assert message_id is not None
        blobs = load_blobs([i.id for i in _attachable(by_message[message_id])])
    for index, message_id in enumerate(ids):
        if message_id is None or message_id not in by_message:
            continue
        images = by_message[message_id]
        message = out[index]
        attached = [i for i in _attachable(images) if i.id in blobs] if index == shown else []
        notes = [image_note(i) for i in images if i not in attached]
        text = _with_notes(message.get("content"), notes)
        if attached:
            content: Any = [{"type": "text", "text": text}] if text.strip() else []
            content += [image_part(str(i.content_type), blobs[i.id]) for i in attached]
        else:
            content = text
        # The message object may be a SpokenMessage (group speaker beside the text): keep it.
        replaced = copy.copy(message)
        replaced["content"] = content
        out[index] = replaced
        counts[index] = counter.count_message(replaced)
    return out, counts


def _latest_with_images(
    messages: Sequence[ChatMessage],
    ids: Sequence[int | None],
    by_message: Mapping[int, list[ImageInfo]],
) -> int | None:
    """The index of the latest user message with an image the model can be shown."""
    for index in range(len(messages) - 1, -1, -1):
        message_id = ids[index]
        if (
            message_id is not None
            and messages[index].get("role") == "user"
            and _attachable(by_message.get(message_id, ()))
        ):
            return index
    return None
