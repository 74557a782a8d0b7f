from __future__ import annotations

from agent_core.context.redaction import REDACTED
from agent_core.context.serialization import (
    CharCap,
    capped_redacted,
    message_body,
    serialize_turn,
    turn_label,
)
from tests.unit.agent_core.context.builders import assistant, call, result, user


class TestCap:
    def test_short_text_is_only_redacted(self):
        assert capped_redacted("password=hunter22") == f"password={REDACTED}"

    def test_long_text_keeps_head_and_tail(self):
        text = "H" * 5_000 + "M" * 10_000 + "T" * 2_000
        capped = capped_redacted(text)
        head, _, _tail = capped.partition("\n[… ")
        assert head == "H" * 4_000
        assert capped.endswith("T" * 1_500)
        assert "11,500 characters omitted" in capped
        assert len(capped) < 6_000 + 60

    def test_cuts_fall_between_words(self):
        text = "/etc/app.conf " * 1_000
        capped = capped_redacted(text)
        head, _, rest = capped.partition("\n[… ")
        tail = rest.partition("…]\n")[2]
        assert head.split() == ["/etc/app.conf"] * len(head.split())
        assert tail.split() == ["/etc/app.conf"] * len(tail.split())
        assert 3_700 < len(head) <= 4_000
        assert 1_300 < len(tail) <= 1_500

    def test_secret_cut_by_the_cap_is_still_redacted(self):
        secret = "sk-" + "a" * 60
        text = "x" * 3_979 + " " + secret + " " + "y" * 10_000
        assert "aaaaaaaaaa" not in capped_redacted(text)

    def test_within_scales_proportionally(self):
        assert CharCap().within(3_000) == CharCap(3_000, 2_000, 750)
        assert CharCap().within(10_000) == CharCap()


class TestLabels:
    def test_roles_and_speakers(self):
        names = {"x": "grep"}
        assert turn_label(user("hi", "alice"), names) == 'USER "alice"'
        assert turn_label(user("hi"), names) == "USER"
        assert turn_label(assistant("a"), names) == "ASSISTANT"
        assert turn_label(result("x"), names) == 'TOOL RESULT "grep"'
        assert turn_label(result("y"), names) == "TOOL RESULT"


class TestSerializeTurn:
    def test_group_user_message(self):
        assert serialize_turn(user("hello there", "alice"), {}) == '[USER "alice"]: "hello there"'

    def test_assistant_calls_are_rendered(self):
        body = message_body(call("x", "terminal", text="checking", command="ls"))
        assert body == 'checking\n[calls] terminal({"command": "ls"})'

    def test_given_body_is_used(self):
        assert serialize_turn(user("raw"), {}, body="cooked") == '[USER]: "cooked"'

    def test_secrets_are_redacted(self):
        assert REDACTED in serialize_turn(user("my token=abcdef123"), {})
