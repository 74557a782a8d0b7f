"""Token accounting: a rough estimate for cheap gates, exact tiktoken counts for the record.

The rough estimate (4 characters per token) only decides whether exact work is worth doing.
Exact counts are computed once per message with the encoding of the model's family and
stored with the message; the provider's reported ``prompt_tokens`` beats both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import tiktoken

CHARS_PER_TOKEN = 4
DEFAULT_ENCODING = "cl100k_base"
PER_MESSAGE_OVERHEAD = 3
"""Tokens every chat message costs beyond its text (OpenAI's chat format)."""
PER_NAME_OVERHEAD = 1
REPLY_PRIMING = 3
"""Tokens the provider adds to prime the assistant's reply."""
IMAGE_TOKENS = 765
"""What one image part is assumed to cost (a high-detail 512x512 tile set)."""

Message = Mapping[str, Any]


def rough_tokens(text: str) -> int:
    """A cheap upper-leaning estimate: 4 characters per token, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _content_text(content: Any) -> tuple[str, int]:
    """The text of a message's content and the number of image parts in it."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    for part in content:
        if not isinstance(part, Mapping):
            texts.append(str(part))
        elif part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") in {"image_url", "image", "input_image"}:
            images += 1
        else:
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
    return "\n".join(texts), images


def _tool_calls_text(message: Message) -> str:
    calls = message.get("tool_calls")
    if not calls:
        return ""
    return json.dumps(calls, ensure_ascii=False, separators=(",", ":"), default=str)


def rough_message_tokens(message: Message) -> int:
    """The rough estimate for one chat message, overhead included."""
    text, images = _content_text(message.get("content"))
    extra = _tool_calls_text(message)
    return (
        PER_MESSAGE_OVERHEAD
        + rough_tokens(text)
        + rough_tokens(extra)
        + images * IMAGE_TOKENS
        + rough_tokens(str(message.get("name") or ""))
    )


def estimate_request_tokens_rough(
    messages: Iterable[Message], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """Rough size of a whole request, tool schemas included (they can add tens of thousands)."""
    total = sum(rough_message_tokens(m) for m in messages) + REPLY_PRIMING
    if tools:
        total += rough_tokens(json.dumps(list(tools), separators=(",", ":"), default=str))
    return total


def _bare_model_name(model: str) -> str:
    return model.rsplit("/", 1)[-1]


@lru_cache(maxsize=64)
def encoding_name_for_model(model: str | None) -> str:
    """The tiktoken encoding of the model's family; ``cl100k_base`` when unknown.

    Only encodings whose files ship offline are returned (``o200k_base``, ``cl100k_base``,
    ``p50k_base``); anything else falls back to the default.
    """
    if not model:
        return DEFAULT_ENCODING
    try:
        name = tiktoken.encoding_name_for_model(_bare_model_name(model))
    except KeyError:
        return DEFAULT_ENCODING
    return name if name in {"o200k_base", "cl100k_base", "p50k_base"} else DEFAULT_ENCODING


@lru_cache(maxsize=8)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


class TokenCounter:
    """Exact token counts with one tiktoken encoding.

    Args:
        encoding_name: a tiktoken encoding whose BPE file is available offline.
    """

    __slots__ = ("_enc", "encoding_name")

    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding_name
        self._enc = _encoding(encoding_name)

    @classmethod
    def for_model(cls, model: str | None) -> TokenCounter:
        """The counter for the model's family."""
        return cls(encoding_name_for_model(model))

    def count_text(self, text: str) -> int:
        """Tokens in plain text; special-token strings in user text count as ordinary text."""
        return len(self._enc.encode_ordinary(text)) if text else 0

    def count_recurring(self, text: str) -> int:
        """:meth:`count_text`, counted once per process.

        For a text every turn sends again (a tools listing, a session's summary): counting
        it each turn cost a share of the turn.
        """
        return _count_recurring(self.encoding_name, text)

    def count_message(self, message: Message, *, recurring: bool = False) -> int:
        """Tokens one chat message costs in a request (the formula litellm's counter uses).

        ``recurring``: its text is counted with :meth:`count_recurring`.
        """
        text, images = _content_text(message.get("content"))
        count = self.count_recurring if recurring else self.count_text
        total = PER_MESSAGE_OVERHEAD + self.count_text(str(message.get("role", "")))
        total += count(text) + images * IMAGE_TOKENS
        total += self.count_text(_tool_calls_text(message))
        name = message.get("name")
        if name:
            total += PER_NAME_OVERHEAD + self.count_text(str(name))
        return total

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a whole transcript, reply priming included."""
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING


RECURRING_CACHE_SIZE = 256
"""Recurring texts kept counted (a worker's tools listings and its sessions' summaries)."""


@lru_cache(maxsize=RECURRING_CACHE_SIZE)
def _count_recurring(encoding_name: str, text: str) -> int:
    return TokenCounter(encoding_name).count_text(text)
