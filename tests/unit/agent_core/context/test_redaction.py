from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core.context import redaction
from agent_core.context.redaction import REDACTED, redact


class TestRedact:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("api_key=sk-abcdefghijklmnopqrstuvwxyz123", f"api_key={REDACTED}"),
            ("MY_SECRET_TOKEN=abcdefgh", f"MY_SECRET_TOKEN={REDACTED}"),
            ('"password": "hunter22"', f'"password": "{REDACTED}"'),
            ("Authorization: Bearer abc.def-ghijk", f"Authorization: Bearer {REDACTED}"),
            ("use sk-proj-aaaaaaaaaaaaaaaaaaaaaaaaaaaa now", f"use {REDACTED} now"),
            ("ghp_" + "a" * 36, REDACTED),
            ("xoxb-1234567890-abcdef", REDACTED),
            ("AKIAABCDEFGHIJKLMNOP", REDACTED),
            ("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", REDACTED),
            ("https://bob:s3cret@example.com/x", f"https://{REDACTED}@example.com/x"),
            ("eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4", REDACTED),
        ],
    )
    def test_secrets_are_replaced(self, text, expected):
        assert redact(text) == expected

    @pytest.mark.parametrize(
        "text",
        [
            json.dumps({"content": json.dumps({"password": "x-prod-pw"})}),
            json.dumps({"a": json.dumps({"b": json.dumps({"api_key": "x-prod-pw"})})}),
            "{\\'password\\': \\'x-prod-pw\\'}",
        ],
    )
    def test_secrets_behind_escaped_quotes(self, text):
        redacted = redact(text)
        assert "x-prod-pw" not in redacted
        assert REDACTED in redacted

    def test_redacting_escaped_json_keeps_it_valid(self):
        text = json.dumps({"content": json.dumps({"password": "x-prod-pw", "user": "bob"})})
        inner = json.loads(json.loads(redact(text))["content"])
        assert inner == {"password": REDACTED, "user": "bob"}

    def test_private_key_block(self):
        text = (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIabc\nxyz\n-----END RSA PRIVATE KEY-----\nbye"
        )
        assert redact(text) == f"key:\n{REDACTED}\nbye"

    @pytest.mark.parametrize(
        "text",
        [
            "commit 3f2a9c1d4e5b fixed it",
            "the token budget is 12000 tokens",
            "see https://example.com/path?q=1",
            "123e4567-e89b-12d3-a456-426614174000",
            "",
        ],
    )
    def test_identifiers_and_prose_survive(self, text):
        assert redact(text) == text


_FULL = re.compile("|".join(pattern for _, pattern in redaction._SECRETS))
_PIECES = [
    "api_key=",
    "token: ",
    "password=",
    "Bearer ",
    "sk-",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "xapp-",
    "AKIA",
    "AIza",
    "eyJ",
    "123456789:AA",
    "https://",
    "user:pw@",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
    " ",
    "\n",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text("aZ0_-:=/@ .'\"", max_size=10), max_size=12))
def test_skipping_absent_patterns_changes_nothing(pieces):
    text = "".join(pieces)
    assert redact(text) == _FULL.sub(redaction._replacement, text)
