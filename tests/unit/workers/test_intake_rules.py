from __future__ import annotations

import pytest

from adapters.messages import InboundMessage
from agent_core.errors import InvalidInput, MessageTooLong
from workers.intake import should_trigger, validate_text


def _msg(**kw: object) -> InboundMessage:
    base: dict[str, object] = {"platform": "telegram", "chat_id": "1", "text": "hi"}
    return InboundMessage(**(base | kw))


class TestShouldTrigger:
    def test_private_chats_always_trigger(self) -> None:
        assert should_trigger(_msg(chat_type="private"), trigger_mode="commands", answer_bots=False)

    @pytest.mark.parametrize(
        ("mode", "addressed", "command", "expected"),
        [
            ("mention", False, None, False),
            ("mention", True, None, True),
            ("mention", False, "help", True),
            ("all", False, None, True),
            ("commands", True, None, False),
            ("commands", False, "new", True),
            ("mention", False, "unknowncmd", False),
        ],
    )
    def test_groups_follow_the_mode(
        self, mode: str, addressed: bool, command: str | None, expected: bool
    ) -> None:
        msg = _msg(chat_type="group", addressed=addressed, command=command)
        assert should_trigger(msg, trigger_mode=mode, answer_bots=False) is expected

    def test_other_bots_only_when_configured(self) -> None:
        msg = _msg(chat_type="private", sender_is_bot=True)
        assert not should_trigger(msg, trigger_mode="all", answer_bots=False)
        assert should_trigger(msg, trigger_mode="all", answer_bots=True)


class TestValidateText:
    @pytest.mark.parametrize("text", ["", "   ", "\n\t"])
    def test_blank_is_refused(self, text: str) -> None:
        with pytest.raises(InvalidInput, match="empty"):
            validate_text(text, 100)

    def test_oversized_names_the_limit(self) -> None:
        with pytest.raises(MessageTooLong, match="limit is 10"):
            validate_text("x" * 11, 10)

    def test_at_the_limit_is_fine(self) -> None:
        validate_text("x" * 10, 10)

    def test_an_image_without_caption_is_a_message(self) -> None:
        validate_text("", 100, has_images=True)

    def test_an_image_does_not_excuse_an_oversized_caption(self) -> None:
        with pytest.raises(MessageTooLong):
            validate_text("x" * 11, 10, has_images=True)
