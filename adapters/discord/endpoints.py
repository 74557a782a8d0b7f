"""Point discord.py at Discord or at a Discord-compatible server (``HUBBUB_DISCORD_API_BASE``).

discord.py keeps its REST base (``discord.http.Route.BASE``) and its gateway URL
(``DiscordWebSocket.DEFAULT_GATEWAY``) in class attributes, so they are per process: this
module is the only place that sets them, and the setting applies to every Discord bot of
the process. It is the API's origin, e.g.
``http://127.0.0.1:8765`` (``/api/v10`` is appended) or a base that already ends in
``/api/v<N>``. The gateway URL is not configured separately: the listener asks the REST API
for it (``GET /gateway/bot``), as Discord documents, and calls :func:`use_gateway`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import discord.gateway
import discord.http
import yarl

log = logging.getLogger(__name__)

API_VERSION = 10
DEFAULT_REST_BASE = f"https://discord.com/api/v{API_VERSION}"
_VERSIONED_PATH = re.compile(r"/api/v\d+$")


class EndpointConfigError(ValueError):
    """A configured or discovered Discord URL is unusable."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(f"{message}, got {url!r}")
        self.url = url
        """The offending value."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where REST requests go, and whether that is Discord itself."""

    rest_base: str
    """The versioned REST base, e.g. ``https://discord.com/api/v10``."""
    custom: bool
    """``True`` when an API base was configured (the gateway URL must then be discovered)."""


def rest_base_for(api_base: str | None) -> Endpoints:
    """The versioned REST base for a configured API base (``None`` means Discord).

    Raises:
        EndpointConfigError: the value is not an http(s) URL.
    """
    if not api_base:
        return Endpoints(DEFAULT_REST_BASE, custom=False)
    url = yarl.URL(api_base.strip())
    if url.scheme not in ("http", "https") or not url.host:
        raise EndpointConfigError(
            "HUBBUB_DISCORD_API_BASE must be an http(s) URL such as http://127.0.0.1:8765",
            api_base,
        )
    path = url.path.rstrip("/")
    if not _VERSIONED_PATH.search(path):
        path = f"{path}/api/v{API_VERSION}"
    return Endpoints(str(url.with_path(path).with_query(None).with_fragment(None)), custom=True)


def use_api_base(api_base: str | None) -> Endpoints:
    """Send this process's discord.py REST requests to ``api_base``.

    ``None`` keeps what the process uses already (Discord itself, unless another bot of
    this process configured a base): the setting is per process, and a second, different
    base is logged as the conflict it is.

    Raises:
        EndpointConfigError: the value is not an http(s) URL.
    """
    current = discord.http.Route.BASE
    if not api_base:
        return Endpoints(current, custom=current != DEFAULT_REST_BASE)
    endpoints = rest_base_for(api_base)
    if current not in (DEFAULT_REST_BASE, endpoints.rest_base):
        log.warning(
            "Discord API base changed for the whole process; bots with different "
            "HUBBUB_DISCORD_API_BASE values cannot share one process",
            extra={"previous": current, "now": endpoints.rest_base},
        )
    discord.http.Route.BASE = endpoints.rest_base
    return endpoints


def use_gateway(url: str) -> yarl.URL:
    """Connect this process's (non-sharded) discord.py clients to the gateway at ``url``.

    Raises:
        EndpointConfigError: the URL is not a ws(s) URL.
    """
    gateway = yarl.URL(url)
    if gateway.scheme not in ("ws", "wss") or not gateway.host:
        raise EndpointConfigError("the Discord gateway URL must be a ws(s) URL", url)
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway
    return gateway
