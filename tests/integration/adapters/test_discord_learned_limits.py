"""A route limit one worker learns from Discord's headers paces every worker of the bot."""

from __future__ import annotations

import secrets
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yarl

from adapters.discord.pacing import DiscordPacing
from adapters.pacing import (
    BotPacer,
    FallbackScheduler,
    LocalScheduler,
    PacingConfig,
    Rate,
    RedisScheduler,
    bot_scope,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DEFAULT = Rate(5, 5.0)
POST = yarl.URL("https://discord.test/api/v10/channels/123/messages")
OTHER_CHANNEL = yarl.URL("https://discord.test/api/v10/channels/456/messages")


def _worker(redis_url: str, scope: str) -> DiscordPacing:
    """One worker process's pacing: its own in-process fallback, the shared Redis."""
    config = PacingConfig(limits={"route": DEFAULT}, max_wait_seconds=1.0, redis_url=redis_url)
    scheduler = FallbackScheduler(RedisScheduler(redis_url), LocalScheduler())
    return DiscordPacing(BotPacer(config, scope, scheduler=scheduler))


async def _answered(pacing: DiscordPacing, url: yarl.URL, headers: dict[str, str]) -> None:
    """What the trace sees when Discord answers a request to ``url``."""
    response = SimpleNamespace(status=200, headers=headers)
    params = SimpleNamespace(method="POST", url=url, headers={}, response=response)
    await pacing._end(cast(Any, None), SimpleNamespace(), cast(Any, params))


async def test_a_route_limit_learnt_by_one_worker_paces_another(redis_url: str) -> None:
    scope = bot_scope("discord", secrets.token_hex(8))
    first, second = _worker(redis_url, scope), _worker(redis_url, scope)
    headers = {
        "X-RateLimit-Limit": "2",
        "X-RateLimit-Remaining": "1",
        "X-RateLimit-Reset-After": "10.0",
    }

    await _answered(first, POST, headers)
    bucket = await second._route_bucket("POST", OTHER_CHANNEL)

    assert bucket is not None
    assert bucket.rate == Rate(2, 10.0), "the other worker paces the route by Discord's limit"
    assert bucket.key.endswith(":route:POST /channels/{id}/messages:456")


async def test_a_worker_with_nothing_learnt_paces_by_the_default(redis_url: str) -> None:
    scope = bot_scope("discord", secrets.token_hex(8))
    bucket = await _worker(redis_url, scope)._route_bucket("POST", POST)
    assert bucket is not None
    assert bucket.rate == DEFAULT
