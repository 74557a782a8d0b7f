"""A tenant's stored settings (``tenants.settings``): prompt instructions and bot defaults.

A bot without its own trigger mode, busy mode, allowlists or tool allow-list inherits the tenant's;
without those either, the deployment's. The tenant's compression thresholds move the
deployment's for every session of the tenant; its models narrow the deployment's list and
pick the default a new session starts on. The JSON column is read through
:class:`TenantDefaults` so every reader agrees on the keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent_core.busy import BUSY_MODES, BusyMode
from agent_core.config import CompressionSettings, Settings
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
    # -- compression thresholds (hosted) --
    compression_threshold: float | None = None
    """Share of the usable window where the compressor starts, over the deployment's."""
    hygiene_threshold: float | None = None
    """Share where the pre-agent safety net starts, over the deployment's."""
    # -- models (hosted) --
    models: tuple[str, ...] | None = None
    """The models the tenant's sessions may use: a part of the deployment's list."""
    default_model: str | None = None
    """The model a session of the tenant uses until ``/model`` switches it."""

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
            compression_threshold=_fraction(data.get("compression_threshold")),
            hygiene_threshold=_fraction(data.get("hygiene_threshold")),
            models=names("models"),
            default_model=data.get("default_model") or None,
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
            "compression_threshold": self.compression_threshold,
            "hygiene_threshold": self.hygiene_threshold,
            "models": list(self.models) if self.models else None,
            "default_model": self.default_model,
        }
        return {k: v for k, v in values.items() if v}


def _fraction(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and 0 < value < 1 else None


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


# -- compression thresholds (hosted) --


def check_compression_thresholds(
    compression: float | None, hygiene: float | None, deployment: CompressionSettings
) -> None:
    """Refuse thresholds outside (0, 1), or a safety net below the compressor.

    An unset one is the deployment's, so the pair that runs is what is checked.

    Raises:
        InvalidInput: a share is not strictly between 0 and 1, or the hygiene threshold
            that would run is below the compression threshold that would run.
    """
    for name, value in (("compression_threshold", compression), ("hygiene_threshold", hygiene)):
        if value is not None and not 0 < value < 1:
            raise InvalidInput(
                f"{name} {value} is out of range: use a share of the window between 0 and 1 "
                "(both excluded), e.g. 0.5"
            )
    runs = replace(
        deployment,
        threshold=compression or deployment.threshold,
        hygiene_threshold=hygiene or deployment.hygiene_threshold,
    )
    if runs.hygiene_threshold < runs.threshold:
        raise InvalidInput(
            f"hygiene_threshold {runs.hygiene_threshold} is below compression_threshold "
            f"{runs.threshold}: the safety net must not start before the compressor"
        )


def compression_for(deployment: CompressionSettings, tenant: TenantDefaults) -> CompressionSettings:
    """The compression settings of the tenant's sessions: the deployment's, with its thresholds.

    A safety net left below the compressor (the deployment's thresholds changed since the
    tenant set its own) is raised to the compressor's line.
    """
    if tenant.compression_threshold is None and tenant.hygiene_threshold is None:
        return deployment
    threshold = tenant.compression_threshold or deployment.threshold
    hygiene = tenant.hygiene_threshold or deployment.hygiene_threshold
    return replace(deployment, threshold=threshold, hygiene_threshold=max(hygiene, threshold))


# -- models (hosted) --


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The models a session may use and the one it uses unless it chose another."""

    allowed: tuple[str, ...]
    default: str | None

    def pick(self, chosen: str | None) -> str | None:
        """The session's model: its own choice while still allowed, else the default."""
        return chosen if chosen is not None and chosen in self.allowed else self.default


def model_choice(tenant: TenantDefaults, deployment: Settings) -> ModelChoice:
    """The tenant's list within the deployment's (``HUBBUB_MODELS``), and its default.

    A model the operator has since removed from the deployment's list is dropped; a
    default no longer allowed gives way to ``HUBBUB_MODEL``, else the first allowed model.
    """
    offered = deployment.allowed_models
    allowed = tuple(m for m in tenant.models or offered if m in offered) or offered
    for default in (tenant.default_model, deployment.model):
        if default is not None and default in allowed:
            return ModelChoice(allowed, default)
    return ModelChoice(allowed, allowed[0] if allowed and deployment.model else None)


def check_models(
    models: Sequence[str] | None, default_model: str | None, offered: Sequence[str]
) -> None:
    """Refuse models the deployment does not offer, or a default outside the tenant's list.

    Raises:
        InvalidInput: a name is not in ``offered`` (``HUBBUB_MODELS``), or the default is
            not among ``models`` (the deployment's list when ``models`` is unset).
    """
    allowed = list(models) if models else list(offered)
    for name in (*(models or ()), *([default_model] if default_model else [])):
        if name not in offered:
            raise InvalidInput(
                f"model {name!r} is not offered by this deployment: use one of "
                f"{', '.join(offered) or '(none: set HUBBUB_MODEL)'}"
            )
    if default_model is not None and default_model not in allowed:
        raise InvalidInput(
            f"default_model {default_model!r} is not in the tenant's models: use one of "
            f"{', '.join(allowed)}"
        )
