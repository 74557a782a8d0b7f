"""Tell an image's type from its first bytes, never from what the platform claimed.

Only the formats every vision provider accepts are recognised (PNG, JPEG, GIF, WebP); a
file that starts like none of them (an HTML login page served with ``image/png``, a
PDF renamed ``photo.jpg``) is not an image to us.
"""

from __future__ import annotations

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_RIFF = b"RIFF"
_WEBP = b"WEBP"


def image_type(data: bytes) -> str | None:
    """The MIME type the bytes' magic number says, or ``None`` when they are no image we take."""
    for signature, content_type in _SIGNATURES:
        if data.startswith(signature):
            return content_type
    if len(data) >= 12 and data.startswith(_RIFF) and data[8:12] == _WEBP:
        return "image/webp"
    return None
