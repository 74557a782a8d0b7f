"""Whether a model reads images: litellm's model map says (``supports_vision``)."""

from __future__ import annotations

from functools import lru_cache

import litellm


@lru_cache(maxsize=64)
def supports_vision(model: str) -> bool:
    """Whether ``model`` (a litellm model string) accepts image parts.

    Unknown models (a local server's own names) count as text-only: an image part sent
    to a model that cannot read it fails the whole call, a note never does.
    """
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:  # litellm raises several types for models it does not know
        return False
