"""What a frozen prompt was built from, as a hash: a change means the prompt is rebuilt.

Memory and the date are deliberately not part of it: they are snapshots that only a new
session or a compaction refreshes.
"""

from __future__ import annotations

import hashlib
import json

from agent_core.prompt.builder import PromptInputs

FINGERPRINT_VERSION = 1


def prompt_fingerprint(inputs: PromptInputs) -> str:
    """SHA-256 over model, toolset, persona and operator context."""
    material = {
        "v": FINGERPRINT_VERSION,
        "model": inputs.model,
        "toolset": sorted(inputs.toolset),
        "persona": inputs.persona,
        "instructions": inputs.instructions or "",
        "context_files": [list(pair) for pair in inputs.context_files],
        "platform": inputs.platform,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()
