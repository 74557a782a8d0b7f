r"""What text Hubbub stores from the outside world, decided once for every platform.

Platforms and browsers hand over strings that no database can hold: a lone UTF-16
surrogate (JSON's ``"\ud800"`` escape decodes to one) cannot be encoded as UTF-8, and
Postgres refuses NUL in text and JSON. Control characters other than tab and line breaks
mean nothing in a chat either. Rather than fail on them (a 500, or a 503 a platform retries
forever), every inbound string is cleaned before it is stored: lone surrogates become
U+FFFD, NUL and the other C0 controls except ``\t``, ``\n`` and ``\r`` are removed.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def storable_text(text: str) -> str:
    """``text`` as Hubbub stores it: lone surrogates replaced, NUL and C0 controls removed.

    A well-formed string (surrogates only ever arrive unpaired in a Python ``str``) without
    those controls is returned unchanged.
    """
    text = _LONE_SURROGATE.sub(REPLACEMENT, text)
    return _CONTROLS.sub("", text)


def storable(value: Any) -> Any:
    """``value`` with :func:`storable_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(storable(v) for v in value)
    return value
