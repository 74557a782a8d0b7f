"""What the pool needs to reach one MCP server, from the config file or a tenant's row."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent_core.config import McpServerConfig

CONFIG_OWNER = ""
"""Owner of the servers in the configuration file (every tenant's bots may use them)."""


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """One server, fully resolved (secrets opened). Its repr never shows ``env``/``headers``."""

    owner: str
    """The tenant that configured it, or :data:`CONFIG_OWNER`."""
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    timeout: float | None = None
    """Seconds per call; the pool's default when ``None``."""
    groups: bool = True
    """Whether its tools are offered in group chats."""

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    @property
    def key(self) -> tuple[str, str, str]:
        """What the pool keys connections by: a changed definition gets a new connection."""
        material = json.dumps(
            [self.command, self.args, self.env, self.url, self.headers], ensure_ascii=False
        )
        return (self.owner, self.name, hashlib.sha256(material.encode()).hexdigest())


def spec_from_config(
    name: str, config: McpServerConfig, *, owner: str = CONFIG_OWNER
) -> McpServerSpec:
    """The spec of a server defined under ``mcp_servers:`` (or rebuilt from a tenant's row)."""
    return McpServerSpec(
        owner=owner,
        name=name,
        command=config.command,
        args=tuple(config.args),
        env=tuple(sorted((k, v.get_secret_value()) for k, v in config.env.items())),
        url=config.url,
        headers=tuple(sorted((k, v.get_secret_value()) for k, v in config.headers.items())),
        timeout=config.timeout,
        groups=config.groups,
    )


def config_specs(servers: Mapping[str, McpServerConfig]) -> list[McpServerSpec]:
    """The servers of the configuration file."""
    return [spec_from_config(name, config) for name, config in servers.items()]


def merge_servers(
    configured: Iterable[McpServerSpec], tenant: Iterable[McpServerSpec]
) -> list[McpServerSpec]:
    """The servers a tenant's bot uses: the file's, and the tenant's own over same names."""
    merged = {spec.name: spec for spec in configured}
    merged.update({spec.name: spec for spec in tenant})
    return list(merged.values())
