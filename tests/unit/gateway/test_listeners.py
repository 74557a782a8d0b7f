"""Which paths the internal listener keeps off the public one."""

from __future__ import annotations

import pytest

from gateway.listeners import is_internal


@pytest.mark.parametrize(
    "path",
    ["/metrics", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/console", "/console/keys"],
)
def test_operator_paths_are_internal(path: str) -> None:
    assert is_internal(path)


@pytest.mark.parametrize(
    "path",
    ["/", "/api/webchat/c/messages", "/webhooks/slack/default", "/consoles", "/api/admin/v1"],
)
def test_everything_else_is_public(path: str) -> None:
    assert not is_internal(path)
