from __future__ import annotations

import json
import time
from collections.abc import Callable
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core.context import redaction, secret_rules
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
            ("ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", REDACTED),
            ("xoxb-1234567890-abcdef", REDACTED),
            ("AKIAABCDEFGHIJKLMNOP", REDACTED),
            ("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", REDACTED),
            ("https://bob:s3cret@example.com/x", f"https://{REDACTED}@example.com/x"),
            (
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
                REDACTED,
            ),
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


_PIECES = [
    "api_key=",
    "token: ",
    "password=",
    "my password is ",
    "Authorization: Basic ",
    "Bearer ",
    "sk-",
    "sk_live_",
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
    "curl -u ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "4eC39HqLyjWDarjtT1zdp7dcQ8sT1vW4yZ7bC0eF3hJ6",
    '\\"',
    " ",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text("aZ0_-:=/@ .'\"", max_size=10), max_size=12))
def test_skipping_rules_without_their_keywords_changes_nothing(pieces):
    text = "".join(pieces)
    rules = secret_rules.rule_set()
    everything = list(range(len(rules.rules)))
    with patch.object(
        secret_rules.RuleSet, "candidates", lambda self, lowered: [everything for _ in lowered]
    ):
        expected = redact(text)
    assert redact(text) == expected


class TestRuleSet:
    """Item 14: the rule set is gitleaks' (vendored, MIT) plus chat phrasings."""

    @pytest.mark.parametrize(
        ("text", "secret"),
        [
            ("stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
            ("restricted rk_live_51H8aBcDeFgHiJkLmNoPqRsT", "rk_live_51H8aBcDeFgHiJkLmNoPqRsT"),
            ("my password is Tr0ub4dor&3", "Tr0ub4dor&3"),
            ("the passphrase was: correct-horse-battery", "correct-horse-battery"),
            ('my password is "letmein" ok', "letmein"),
            ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
            ("Proxy-Authorization: Digest a1b2c3d4e5f6", "a1b2c3d4e5f6"),
            ("glpat-xY9zW8vU7tS6rQ5pO4nM", "glpat-xY9zW8vU7tS6rQ5pO4nM"),
            (
                "npm_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
                "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
            ),
            (
                "https://hooks.slack.com/services/T01ABCDEF/B01ABCDEF/aBcDeFgHiJkLmNoPqRsTuVwX",
                "hooks.slack.com/services/T01ABCDEF/B01ABCDEF/aBcDeFgHiJkLmNoPqRsTuVwX",
            ),
            ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
            (
                "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            ("dop_v1_" + "a1b2c3d4" * 8, "a1b2c3d4" * 8),
            ("shpat_" + "a1b2c3d4" * 4, "shpat_" + "a1b2c3d4" * 4),
            (
                "cut -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u",
                "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u",
            ),
        ],
    )
    def test_secret_kinds(self, text, secret):
        redacted = redact(text)
        assert secret not in redacted
        assert REDACTED in redacted

    @pytest.mark.parametrize(
        "text",
        [
            "tx 0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
            "https://etherscan.io/tx/0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
            "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "version 1.4.0+a1b2c3d4e, see /var/log/Xorg.0.log",
            "password is your user password with sudo",
            "the key to the problem is the api and the auth flow",
            "keyring is locked; key=value pairs",
        ],
    )
    def test_identifiers_and_prose_are_not_secrets(self, text):
        assert redact(text) == text

    def test_the_vendored_rules_are_gitleaks_with_their_licence(self):
        rules = secret_rules.rule_set()
        ids = {rule.id for rule in rules.rules}
        assert {"generic-api-key", "stripe-access-token", "private-key", "jwt"} <= ids
        assert len(ids) > 200
        licence = secret_rules.RULES_FILE.with_name("LICENSE-gitleaks").read_text()
        assert "MIT License" in licence

    def test_gitleaks_allowlists_apply(self):
        # gitleaks' AWS rule allows its documentation examples.
        assert redact("AKIAIOSFODNN7EXAMPLE") == "AKIAIOSFODNN7EXAMPLE"

    def test_lone_surrogates_and_other_scripts_keep_their_offsets(self):
        text = "é \ud800 password=abcdefg ü sk_live_4eC39HqLyjWDarjtT1zdp7dc ✓"
        assert redact(text) == f"é \ud800 password={REDACTED} ü {REDACTED} ✓"

    def test_a_batch_is_redacted_like_each_text(self):
        texts = ["password=abcdefg", "", "hello key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"]
        assert redaction.redact_all(texts) == [redact(t) for t in texts]


ALL_KEYWORDS = " ".join(
    sorted({k for rule in secret_rules.rule_set().rules for k in rule.keywords})
)
CRAFTED: dict[str, Callable[[int], str]] = {
    # Shapes that made the previous (backtracking) redactor quadratic, and repetitions
    # of every rule's trigger: each search must stay linear in the text.
    "name_chain": lambda n: ("a-" * n)[:n] + " token",
    "assignments": lambda n: ("token=" * n)[:n],
    "phrases": lambda n: ("password is " * n)[:n],
    "pem_begin": lambda n: ("-----BEGIN RSA PRIVATE KEY-----\n" * n)[:n],
    "curl_user": lambda n: ("curl -u aaa:bbb " * n)[:n],
    "curl_header": lambda n: ('curl -H "Authorization: ' * n)[:n],
    "all_keywords": lambda n: ((ALL_KEYWORDS + " ") * n)[:n],
    "long_value": lambda n: "api_key = " + "a1B2" * (n // 4) + "#",
    "overlapping_keywords": lambda n: ("ey" * n)[:n],
    "escaped_json": lambda n: ('{\\"password\\": \\"' * n)[:n],
    "url_userinfo": lambda n: ("://" + "a:" * n)[:n],
}


def _cpu_seconds(text: str, repeats: int = 3) -> float:
    """The least CPU time of a few runs: load on the machine only ever adds time."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        redact(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_redaction_is_linear_on_crafted_text(name):
    """Item 15: sixteen times the text costs about sixteen times the CPU, not 256 times.

    No wall-clock budget: the test compares the same input shape at two sizes in the same
    process, and takes the best of several runs, so a loaded machine slows both alike.
    The bound (48x) leaves three times the linear ratio for noise and is still five times
    below what a quadratic search would cost.
    """
    make = CRAFTED[name]
    small, large = _cpu_seconds(make(6_000)), _cpu_seconds(make(96_000))
    assert large <= 48 * max(small, 1e-4), (name, small, large)


def test_crafted_text_costs_no_more_per_kilobyte_than_text_with_every_keyword():
    """The budget per kB: no crafted shape costs much more than ordinary text that makes
    every rule run (the most work any text can legitimately ask for), measured alike."""
    size = 24_000
    baseline = _cpu_seconds(((ALL_KEYWORDS + " the quick brown fox ") * size)[:size])
    for name, make in CRAFTED.items():
        assert _cpu_seconds(make(size)) <= 10 * max(baseline, 1e-4), name
