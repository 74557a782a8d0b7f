"""Keep litellm and tiktoken off the network: they must work with no internet at all.

This runs when ``agent_core`` is imported, before anything imports litellm or tiktoken,
because both read these variables once, at import or first use.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _bundled_tokenizer_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


def configure_offline_environment() -> None:
    """Point tiktoken at litellm's bundled BPE files and stop litellm's remote fetches.

    Values already set by the operator win.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    tokenizers = _bundled_tokenizer_dir()
    if tokenizers is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", tokenizers)
        # litellm overwrites TIKTOKEN_CACHE_DIR on first token_counter() unless this is set.
        os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", os.environ["TIKTOKEN_CACHE_DIR"])
