from __future__ import annotations

from agent_core.context.media import IMAGE_PLACEHOLDER, strip_historical_media, without_images
from tests.unit.agent_core.context.builders import assistant, image_user, user


class TestWithoutImages:
    def test_images_become_placeholders(self):
        replaced = without_images(image_user("see"))
        assert replaced is not None
        assert replaced["content"] == [
            {"type": "text", "text": "see"},
            {"type": "text", "text": IMAGE_PLACEHOLDER},
        ]

    def test_text_messages_are_left_alone(self):
        assert without_images(user("x")) is None


class TestStripHistoricalMedia:
    def test_images_before_the_latest_image_go(self):
        messages = [image_user("old"), assistant("saw it"), image_user("new"), assistant("ok")]
        rewritten = strip_historical_media(messages)
        assert set(rewritten) == {0}
        assert messages[0]["content"][1]["type"] == "image_url"  # input untouched

    def test_nothing_without_a_user_image(self):
        assert strip_historical_media([user("a"), assistant("b")]) == {}
