"""The JSON log formatter keeps harmless fields and blanks secrets."""

from __future__ import annotations

import json
import logging

import pytest

from agent_core.logs import JsonFormatter


def _format(**extra: object) -> dict[str, object]:
    record = logging.makeLogRecord({"msg": "compacted", "levelno": 20, "levelname": "INFO"})
    record.__dict__.update(extra)
    out: dict[str, object] = json.loads(JsonFormatter().format(record))
    return out


@pytest.mark.parametrize(
    "field", ["tokens_before", "tokens_after", "max_tokens", "prompt_tokens", "tokenizer"]
)
def test_harmless_fields_are_kept(field: str) -> None:
    assert _format(**{field: 1234})[field] == 1234


@pytest.mark.parametrize(
    "field", ["token", "bot_token", "api_key", "x_api_key", "apiKey", "password", "signing_secret"]
)
def test_secret_fields_are_blanked(field: str) -> None:
    assert _format(**{field: "hunter2-value"})[field] == "[REDACTED]"


def test_secrets_inside_values_are_redacted() -> None:
    line = _format(reason="Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz012345")
    assert "abcdefghijklmnop" not in str(line["reason"])
    assert "Incorrect API key provided" in str(line["reason"])
