"""A tenant's stored settings (``tenants.settings``): prompt instructions and bot defaults.

A bot without its own trigger mode, busy mode, allowlists or tool allow-list inherits the tenant's;
without those either, the deployment's. The JSON column is read through :class:`TenantDefaults`
so every reader agrees on the keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_core.busy import BUSY_MODES, BusyMode
from agent_core.errors import InvalidInput

TRIGGER_MODES = ("mention", "all", "commands")
TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_.*?!\[\]-]{1,128}$")
"""A tool name or ``fnmatch`` pattern: tool-name characters and wildcards only."""


@dataclass(frozen=True, slots=True)
class TenantDefaults:
    """The tenant's settings; ``None`` means "not set here"."""

    instructions: str | None = None
    trigger_mode: str | None = None
    allow_users: tuple[str, ...] | None = None
    allow_chats: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    busy_mode: str | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> TenantDefaults:
        """Read the stored column (missing or empty values are "not set")."""
        data = value or {}

        def names(key: str) -> tuple[str, ...] | None:
            items = data.get(key)
            return tuple(str(i) for i in items) if items else None

        return cls(
            instructions=data.get("instructions") or None,
            trigger_mode=data.get("trigger_mode") or None,
            allow_users=names("allow_users"),
            allow_chats=names("allow_chats"),
            tools=names("tools"),
            busy_mode=data.get("busy_mode") or None,
        )

    def to_json(self) -> dict[str, Any]:
        """What the column stores: set values only."""
        values: dict[str, Any] = {
            "instructions": self.instructions,
            "trigger_mode": self.trigger_mode,
            "allow_users": list(self.allow_users) if self.allow_users else None,
            "allow_chats": list(self.allow_chats) if self.allow_chats else None,
            "tools": list(self.tools) if self.tools else None,
            "busy_mode": self.busy_mode,
        }
        return {k: v for k, v in values.items() if v}


def check_trigger_mode(mode: str | None) -> None:
    """Refuse an unknown trigger mode.

    Raises:
        InvalidInput: the mode is not one of :data:`TRIGGER_MODES`.
    """
    if mode is not None and mode not in TRIGGER_MODES:
        raise InvalidInput(
            f"trigger mode {mode!r} is unknown: use one of {', '.join(TRIGGER_MODES)}"
        )


def check_busy_mode(mode: str | None) -> None:
    """Refuse an unknown busy mode.

    Raises:
        InvalidInput: the mode is not one of :data:`~agent_core.busy.BUSY_MODES`.
    """
    if mode is not None and mode not in BUSY_MODES:
        raise InvalidInput(f"busy mode {mode!r} is unknown: use one of {', '.join(BUSY_MODES)}")


def check_tool_patterns(patterns: Iterable[str] | None) -> None:
    """Refuse a tool allow-list entry that could never name a tool.

    Raises:
        InvalidInput: an entry is empty, too long or holds characters no tool name has.
    """
    for pattern in patterns or ():
        if not TOOL_PATTERN.fullmatch(pattern):
            raise InvalidInput(
                f"tool pattern {pattern!r} is invalid: use tool names and the wildcards "
                "* ? [...] (letters, digits, _ . - only)"
            )


def effective_trigger_mode(own: str | None, tenant: TenantDefaults, deployment: str) -> str:
    """A bot's own trigger mode, else its tenant's, else the deployment's."""
    return own or tenant.trigger_mode or deployment


def effective_busy_mode(own: str | None, tenant: TenantDefaults, deployment: str) -> BusyMode:
    """A bot's own busy mode, else its tenant's, else the deployment's."""
    return BusyMode(own or tenant.busy_mode or deployment)
