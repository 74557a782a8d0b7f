from __future__ import annotations

import pytest

from agent_core.context.transcript import (
    content_text,
    has_images,
    is_visible_reply,
    message_tokens,
    speaker_of,
    spoken_text,
    tool_calls_by_id,
)
from agent_core.tokens import rough_message_tokens
from tests.unit.agent_core.context.builders import assistant, call, image_user, result, user


class TestContentText:
    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (None, ""),
            ("hi", "hi"),
            ([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}], "a"),
            ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
            (["raw"], "raw"),
        ],
    )
    def test_text(self, content, expected):
        assert content_text(content) == expected


class TestVisibleReply:
    @pytest.mark.parametrize(
        ("message", "visible"),
        [
            (assistant("hello"), True),
            (assistant("   "), False),
            (assistant(None), False),
            (call("c1"), False),
            (call("c1", text="let me check"), True),
            (user("hello"), False),
        ],
    )
    def test_visible(self, message, visible):
        assert is_visible_reply(message) is visible


class TestToolLinks:
    def test_calls_by_id(self):
        calls = tool_calls_by_id([call("a", "grep", pattern="x"), result("a")])
        assert calls == {"a": ("grep", '{"pattern": "x"}')}

    def test_non_string_arguments_are_serialised(self):
        message = {
            "role": "assistant",
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"k": 1}}}],
        }
        assert tool_calls_by_id([message]) == {"a": ("f", '{"k": 1}')}


class TestSpeakers:
    def test_name_field_wins(self):
        assert speaker_of({"role": "user", "name": "bob", "content": "[alice] hi"}) == "bob"

    def test_stored_speaker(self):
        assert speaker_of(user("hi", "alice")) == "alice"
        assert spoken_text(user("hi", "alice")) == "hi"

    @pytest.mark.parametrize("name", ["[DEV] alice", "bob[m]", "[[x]]", "a] b [c"])
    def test_names_with_brackets_come_from_the_row(self, name):
        """Item 21c: the speaker is never parsed out of the text."""
        message = user("[not me] hi", name)
        assert message["content"] == f"[{name}] [not me] hi"
        assert speaker_of(message) == name
        assert spoken_text(message) == "[not me] hi"

    @pytest.mark.parametrize(
        "message", [user("hi"), user("[alice] typed a label"), assistant("[x] y"), image_user()]
    )
    def test_no_speaker(self, message):
        assert speaker_of(message) is None
        assert spoken_text(user("[alice] hi")) == "[alice] hi"

    def test_has_images(self):
        assert has_images(image_user())
        assert not has_images(user("x"))


class TestMessageTokens:
    def test_uses_cached_counts(self):
        assert message_tokens([user("a"), user("b")], [5, 7]) == [5, 7]

    def test_falls_back_to_rough(self):
        messages = [user("hello world" * 10)]
        assert message_tokens(messages) == [rough_message_tokens(messages[0])]

    def test_mismatch_is_an_error(self):
        with pytest.raises(ValueError, match="token_counts has 1 entries for 2 messages"):
            message_tokens([user("a"), user("b")], [1])
