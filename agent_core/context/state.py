"""The context engine's per-session state: a small value the caller stores and restores.

Hubbub builds a fresh agent (and engine) for every turn, so nothing the engine learns may
live only in memory: the compaction count, the anti-thrashing counter, the current
summary, the failure cooldown and the provider's last real prompt size all travel in this
dataclass, which serialises to a JSON-safe dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class EngineState:
    """What a context engine knows about one session between turns."""

    compression_count: int = 0
    """Compactions applied in this session."""
    ineffective_count: int = 0
    """Consecutive compactions that saved less than 10 % (or could not run)."""
    summary: str | None = None
    """The current summary body, without markers; updated, not rewritten, next time."""
    summary_version: int = 0
    """Bumped by every applied compaction."""
    cooldown_until: datetime | None = None
    """No automatic compaction before this (timezone-aware) time after a summary failure."""
    cooldown_reason: str | None = None
    last_prompt_tokens: int = 0
    """The provider's ``prompt_tokens`` for the last call; 0 when unknown."""
    awaiting_real_usage: bool = False
    """A compaction ran and the provider has not yet reported the new prompt size."""
    tokens_before_compaction: int = 0
    """The prompt size that triggered the last compaction; savings are judged against it."""
    post_compaction_rough: int = 0
    """The rough size of the transcript right after the last compaction."""
    fit_proven: bool = False
    """Since the last compaction, the provider reported a prompt under the threshold."""

    def in_cooldown(self, now: datetime) -> bool:
        """Whether automatic compaction must wait."""
        return self.cooldown_until is not None and now < self.cooldown_until

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (datetimes as ISO 8601 strings)."""
        data = asdict(self)
        if self.cooldown_until is not None:
            data["cooldown_until"] = self.cooldown_until.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineState:
        """The state :meth:`to_dict` produced; unknown keys are ignored, missing ones default.

        Raises:
            ValueError: ``cooldown_until`` is not an ISO 8601 timestamp with a time zone.
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        cooldown = values.get("cooldown_until")
        if isinstance(cooldown, str):
            values["cooldown_until"] = datetime.fromisoformat(cooldown)
        if values.get("cooldown_until") is not None and values["cooldown_until"].tzinfo is None:
            raise ValueError("cooldown_until must carry a time zone")
        return cls(**values)
