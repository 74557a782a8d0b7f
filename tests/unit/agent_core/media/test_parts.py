"""Images join the transcript by reference: parts for vision models, notes for the rest."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.context.serialization import message_body
from agent_core.context.transcript import SpokenMessage, speaker_of
from agent_core.db.models import MediaState
from agent_core.media.parts import image_note, with_images
from agent_core.media.repository import ImageInfo
from agent_core.tokens import IMAGE_TOKENS, TokenCounter
from tests.fixtures.images import image_bytes

COUNTER = TokenCounter()
PNG = image_bytes("png")
B64 = base64.b64encode(PNG).decode()


def info(media_id: str, message_id: int, **kw: Any) -> ImageInfo:
    values: dict[str, Any] = {
        "filename": "photo.jpg",
        "width": 1280,
        "height": 720,
        "state": MediaState.READY,
        "reason": None,
        "content_type": "image/png",
    }
    values.update(kw)
    return ImageInfo(id=media_id, message_id=message_id, **values)


class Blobs:
    """Serves every requested id the PNG and remembers what was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, ids: Sequence[str]) -> Mapping[str, bytes]:
        self.asked += ids
        return dict.fromkeys(ids, PNG)


def transcript() -> tuple[list[dict[str, Any]], list[int | None], list[int]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "look at this"},
        {"role": "assistant", "content": "a cat"},
        {"role": "user", "content": "and this one?"},
        {"role": "assistant", "content": "a dog"},
        {"role": "user", "content": "which is nicer?"},
    ]
    ids: list[int | None] = [1, 2, 3, 4, 5]
    return messages, ids, [COUNTER.count_message(m) for m in messages]


def build(
    infos: Sequence[ImageInfo], *, vision: bool, blobs: Blobs | None = None
) -> tuple[list[dict[str, Any]], list[int]]:
    messages, ids, counts = transcript()
    return with_images(
        messages,
        ids,
        counts,
        infos,
        vision=vision,
        load_blobs=blobs or Blobs(),
        counter=COUNTER,
    )


class TestVisionModels:
    def test_the_latest_image_is_an_image_part_with_a_data_url(self) -> None:
        messages, _ = build([info("a", 3)], vision=True)
        content = messages[2]["content"]
        assert content == [
            {"type": "text", "text": "and this one?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        ]

    def test_earlier_images_stay_notes_and_their_bytes_are_never_read(self) -> None:
        blobs = Blobs()
        messages, _ = build([info("old", 1), info("new", 3)], vision=True, blobs=blobs)
        assert messages[0]["content"] == "look at this\n[image: photo.jpg, 1280x720]"
        assert isinstance(messages[2]["content"], list)
        assert blobs.asked == ["new"]

    def test_an_image_part_costs_the_fixed_estimate_not_its_base64(self) -> None:
        messages, ids, counts = transcript()
        out, counted = with_images(
            messages,
            ids,
            counts,
            [info("a", 3)],
            vision=True,
            load_blobs=lambda wanted: dict.fromkeys(wanted, PNG + b"\0" * 1_000_000),
            counter=COUNTER,
        )
        assert len(out[2]["content"][1]["image_url"]["url"]) > 1_000_000
        text_only = COUNTER.count_message({"role": "user", "content": "and this one?"})
        assert counted[2] == text_only + IMAGE_TOKENS

    def test_a_refused_image_is_a_note_saying_why(self) -> None:
        refused = info(
            "a", 3, state=MediaState.REFUSED, reason="larger than the 5 MB limit", content_type=None
        )
        messages, _ = build([refused], vision=True)
        assert messages[2]["content"] == (
            "and this one?\n[image photo.jpg could not be included: larger than the 5 MB limit]"
        )

    def test_untouched_messages_are_the_same_objects(self) -> None:
        before, ids, counts = transcript()
        after, _ = with_images(
            before, ids, counts, [info("a", 3)], vision=True, load_blobs=Blobs(), counter=COUNTER
        )
        assert after[0] is before[0]
        assert after[4] is before[4]
        assert before[2]["content"] == "and this one?"


class TestTextModels:
    def test_every_image_is_a_note_and_no_bytes_are_read(self) -> None:
        blobs = Blobs()
        messages, counts = build([info("a", 1), info("b", 3)], vision=False, blobs=blobs)
        assert messages[2]["content"] == "and this one?\n[image: photo.jpg, 1280x720]"
        assert blobs.asked == []
        assert all(isinstance(m["content"], str) for m in messages)
        assert counts[2] == COUNTER.count_message(messages[2])

    def test_a_caption_less_image_is_just_its_note(self) -> None:
        messages, ids, counts = transcript()
        messages[2] = {"role": "user", "content": ""}
        out, _ = with_images(
            messages,
            ids,
            counts,
            [info("a", 3, width=None, height=None, filename="dashboard.png")],
            vision=False,
            load_blobs=Blobs(),
            counter=COUNTER,
        )
        assert out[2]["content"] == "[image: dashboard.png]"


def test_a_group_speaker_stays_beside_the_image() -> None:
    spoken = SpokenMessage("Ann", "what is this?")
    out, _ = with_images(
        [spoken], [7], [10], [info("a", 7)], vision=True, load_blobs=Blobs(), counter=COUNTER
    )
    assert speaker_of(out[0]) == "Ann"
    assert out[0]["content"][0] == {"type": "text", "text": "[Ann] what is this?"}


def test_image_note_names_the_file_and_its_size() -> None:
    assert image_note(info("a", 1)) == "[image: photo.jpg, 1280x720]"


def test_what_a_summary_reads_of_an_image_turn_never_carries_its_bytes() -> None:
    messages, _ = build([info("a", 3)], vision=True)
    body = message_body(messages[2])
    assert body == "and this one?"
    assert B64[:40] not in body
