"""Which buckets each platform's calls count against."""

from __future__ import annotations

import yarl

from adapters.discord.pacing import route_of
from adapters.telegram.client import is_group


def test_discord_routes_are_keyed_by_their_channel() -> None:
    base = "http://127.0.0.1:8765/api/v10"
    assert route_of("POST", yarl.URL(f"{base}/channels/123/messages")) == (
        "POST /channels/{id}/messages",
        "123",
    )
    assert route_of("PATCH", yarl.URL(f"{base}/channels/123/messages/456")) == (
        "PATCH /channels/{id}/messages/{id}",
        "123",
    )
    assert route_of("GET", yarl.URL(f"{base}/users/@me")) == ("GET /users/@me", None)


def test_telegram_groups_are_the_negative_chat_ids() -> None:
    assert is_group("-1009876543210")
    assert not is_group("111111111")
