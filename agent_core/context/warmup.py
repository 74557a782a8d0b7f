"""Builds the compressor's compiled tables before the first compaction needs them.

The secret rules (gitleaks' config: a TOML parse, ~290 RE2 compilations and the keyword
overlap table) and the identifier patterns (one per combination of the characters that
gate their alternatives) are built lazily and cached per process. Left lazy, the first
compaction of a process pays for all of them: several hundred milliseconds of CPU on top
of a ~100 ms compaction of 5,000 messages. Built at startup, every compaction costs the same.
"""

from __future__ import annotations

from itertools import combinations

from agent_core.context.identifiers import GATING_MARKS, warm_patterns
from agent_core.context.secret_rules import rule_set


def warm_compressor() -> None:
    """Compile every table the compressor caches; idempotent and cheap once done."""
    rule_set()
    marks = range(len(GATING_MARKS) + 1)
    warm_patterns("".join(chosen) for n in marks for chosen in combinations(GATING_MARKS, n))
