"""Shared test setup: offline model tooling, real-service fixtures, a network guard."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import agent_core  # noqa: F401  (sets the offline environment before litellm loads)

# Tests send many messages from one sender; the rate-limit tests set the limits they check.
os.environ.setdefault("HUBBUB_RATE_LIMIT_USER", "off")
os.environ.setdefault("HUBBUB_RATE_LIMIT_CHAT", "off")

pytest_plugins = [
    "tests.fixtures.browser",
    "tests.fixtures.database",
    "tests.fixtures.llm",
    "tests.fixtures.pacing",
    "tests.fixtures.redis",
    "tests.fixtures.services",
    "tests.fixtures.restartable",
    "tests.fixtures.traces",
]

settings.register_profile(
    "hubbub", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("hubbub")

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in _LOCAL_HOSTS and not host.startswith("/"):
        raise RuntimeError(f"tests must not reach the network (tried {address!r})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse connections to anything but this machine: providers are local fakes."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
