"""Structured logging: one JSON object per line, with the ``extra=`` fields of each call.

Message bodies and secrets are never passed to INFO logs by Hubbub's code; as a second
line of defence this module blanks any extra field whose name says it holds a secret
(``token``, ``bot_token``, ``api_key``, ``password``… as whole words, so ``max_tokens``
and ``tokens_before`` stay readable) and redacts secrets found in string values.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

from agent_core.context.redaction import REDACTED, redact

_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's ANSI copy of msg
    "litellm_redacted",  # litellm's marker attribute
}
_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "authorization", "apikey", "cookie", "credentials"}
)
"""A field name with one of these as a whole word holds a secret."""
_SECRET_PAIRS = ("api_key", "private_key", "secret_key", "access_key")
"""Two-word names that hold one."""
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[^a-z0-9]+")


def is_secret_field(name: str) -> bool:
    """Whether a log field called ``name`` holds a secret (``bot_token``, ``apiKey``)."""
    snake = _CAMEL.sub(r"\1_\2", name).lower()
    words = [word for word in _WORD.split(snake) if word]
    joined = "_".join(words)
    return bool(_SECRET_WORDS.intersection(words)) or any(
        f"_{pair}_" in f"_{joined}_" for pair in _SECRET_PAIRS
    )


class JsonFormatter(logging.Formatter):
    """Formats records as JSON objects."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key in _RESERVED or key.startswith("_"):
                continue
            if is_secret_field(key):
                value = REDACTED
            elif isinstance(value, str):
                value = redact(value)
            payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


NOISY_LOGGERS = (
    "LiteLLM",
    "LiteLLM Router",  # "litellm.completion(model=…) 200 OK" for every call, at INFO
    "LiteLLM Proxy",
    "litellm",
    "httpx",
    "httpcore",
    "telegram",
    "discord",
    "urllib3",
)
"""Libraries that log every request at INFO: only their warnings and errors show."""


def configure_logging(level: str = "INFO", *, json_lines: bool = True) -> None:
    """Route all logs to stderr in the chosen format; quiet chatty libraries."""
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
