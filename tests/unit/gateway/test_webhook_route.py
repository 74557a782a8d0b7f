"""The webhook route passes the adapter's answer on, ``Retry-After`` included."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.base import RETRY_LATER_SECONDS, BotConfig, WebhookHandler, WebhookResponse
from gateway.routes import webhooks


class _Unavailable(WebhookHandler):
    async def handle(self, headers: Mapping[str, str], body: bytes) -> WebhookResponse:
        return WebhookResponse.unavailable("storage is down")


class _Supervisor:
    def webhook(self, platform: str, bot_id: str) -> WebhookHandler | None:
        if (platform, bot_id) != ("telegram", "default"):
            return None

        async def sink(_: object) -> None:
            raise AssertionError("nothing is stored")

        return _Unavailable(BotConfig(platform="telegram"), sink)


def _client() -> TestClient:
    app = FastAPI()
    app.include_router(webhooks.router)
    app.state.supervisor = _Supervisor()
    return TestClient(app)


def test_a_503_from_the_adapter_tells_the_platform_when_to_retry() -> None:
    response = _client().post("/webhooks/telegram/default", content=b"{}")
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(RETRY_LATER_SECONDS)
    assert response.json() == {"error": "storage is down"}


def test_an_ordinary_answer_has_no_retry_after() -> None:
    response = _client().post("/webhooks/slack/nobody", content=b"{}")
    assert response.status_code == 404
    assert "retry-after" not in response.headers
