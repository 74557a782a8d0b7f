"""Structured logging: one JSON object per line, with the ``extra=`` fields of each call.

Message bodies and secrets are never passed to INFO logs by Hubbub's code; this module
also drops any extra field whose name says it holds one, as a second line of defence.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's ANSI copy of msg
    "litellm_redacted",  # litellm's marker attribute
}
_SECRET_WORDS = ("token", "secret", "password", "api_key", "authorization")


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
            if any(word in key.lower() for word in _SECRET_WORDS):
                value = "[REDACTED]"
            payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


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
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "telegram", "discord", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
