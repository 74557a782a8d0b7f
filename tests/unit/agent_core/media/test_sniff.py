"""An image's type comes from its bytes, whatever the platform claimed."""

from __future__ import annotations

import pytest

from agent_core.media.sniff import image_type
from tests.fixtures.images import image_bytes


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("png", "image/png"), ("jpg", "image/jpeg"), ("gif", "image/gif"), ("webp", "image/webp")],
)
def test_real_images_are_recognised(kind: str, expected: str) -> None:
    assert image_type(image_bytes(kind)) == expected


@pytest.mark.parametrize(
    "data",
    [
        image_bytes("bmp"),
        b"<!DOCTYPE html><html><body>Sign in to Slack</body></html>",
        b"%PDF-1.7\n",
        b"RIFF\x00\x00\x00\x00WAVEfmt ",
        b"",
        b"\x89PN",
    ],
    ids=["bmp", "html-login-page", "pdf", "riff-wave", "empty", "truncated-png"],
)
def test_anything_else_is_no_image(data: bytes) -> None:
    assert image_type(data) is None
