"""Where discord.py is pointed, and how failures become DeliveryErrors."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import discord
import discord.gateway
import discord.http
import pytest
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

from adapters.base import DeliveryProgress
from adapters.discord.endpoints import (
    DEFAULT_REST_BASE,
    EndpointConfigError,
    rest_base_for,
    use_api_base,
    use_gateway,
)
from adapters.discord.errors import delivery_error, describe, is_invalid_form, retry_after
from adapters.messages import OutboundMessage


@pytest.fixture(autouse=True)
def _restore_discord_globals() -> Iterator[None]:
    rest, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    yield
    discord.http.Route.BASE = rest
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway


class TestEndpoints:
    @pytest.mark.parametrize(
        ("api_base", "rest"),
        [
            (None, DEFAULT_REST_BASE),
            ("", DEFAULT_REST_BASE),
            ("http://127.0.0.1:8765", "http://127.0.0.1:8765/api/v10"),
            ("http://127.0.0.1:8765/", "http://127.0.0.1:8765/api/v10"),
            ("https://proxy.internal/discord", "https://proxy.internal/discord/api/v10"),
            ("https://proxy.internal/api/v9/", "https://proxy.internal/api/v9"),
        ],
    )
    def test_rest_base(self, api_base: str | None, rest: str) -> None:
        endpoints = rest_base_for(api_base)
        assert endpoints.rest_base == rest
        assert endpoints.custom is bool(api_base)

    @pytest.mark.parametrize("api_base", ["ftp://x", "127.0.0.1:8765", "http://"])
    def test_bad_base_is_refused_with_the_setting_name(self, api_base: str) -> None:
        with pytest.raises(EndpointConfigError, match="HUBBUB_DISCORD_API_BASE") as caught:
            rest_base_for(api_base)
        assert caught.value.url == api_base

    def test_use_api_base_sets_discord_py_globals(self) -> None:
        discord.http.Route.BASE = DEFAULT_REST_BASE
        assert use_api_base(None).custom is False
        use_gateway("ws://127.0.0.1:9/gateway")
        endpoints = use_api_base("http://127.0.0.1:9")
        assert endpoints.custom is True
        assert discord.http.Route("GET", "/users/@me").url == "http://127.0.0.1:9/api/v10/users/@me"
        gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        assert gateway == yarl.URL("ws://127.0.0.1:9/gateway"), "the discovered gateway stays"

    def test_a_bot_without_a_base_shares_the_process_base(self) -> None:
        use_api_base("http://127.0.0.1:9")
        endpoints = use_api_base(None)
        assert endpoints == rest_base_for("http://127.0.0.1:9")
        assert discord.http.Route.BASE == "http://127.0.0.1:9/api/v10"

    def test_a_conflicting_base_is_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        use_api_base("http://127.0.0.1:9")
        use_api_base("http://127.0.0.1:10")
        assert "cannot share one process" in caplog.text
        assert discord.http.Route.BASE == "http://127.0.0.1:10/api/v10"

    def test_gateway_must_be_a_websocket(self) -> None:
        with pytest.raises(EndpointConfigError, match="ws"):
            use_gateway("http://127.0.0.1:9/gateway")


class _Response:
    """Enough of aiohttp's response for discord.HTTPException."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reason = "reason"
        self.headers = CIMultiDictProxy(CIMultiDict(headers or {}))


def http_error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    response: Any = _Response(status, headers)
    if status == 403:
        return discord.Forbidden(response, body)
    if status >= 500:
        return discord.DiscordServerError(response, body)
    return discord.HTTPException(response, body)


def progress(chunks: int = 0, *, unsettled: bool = False) -> DeliveryProgress:
    message = OutboundMessage(
        platform="discord",
        chat_id="1",
        text="x",
        delivery_id="9",
        delivered_chunks=chunks,
        delivered_ids=tuple(str(i) for i in range(chunks)),
        unsettled_since=datetime.now(UTC) if unsettled else None,
    )
    return DeliveryProgress(message)


class TestDeliveryErrors:
    def test_rate_limit_is_retried_after_the_wait_and_created_nothing(self) -> None:
        error = delivery_error(discord.RateLimited(42.5), progress())
        assert (error.retryable, error.retry_after, error.maybe_sent) == (True, 42.5, False)

    def test_cloudflare_style_429_uses_retry_after_header(self) -> None:
        exc = http_error(429, "banned", {"Retry-After": "7"})
        error = delivery_error(exc, progress())
        assert (error.retryable, error.retry_after) == (True, 7.0)
        assert retry_after(http_error(429, "x", {"Retry-After": "soon"})) is None

    @pytest.mark.parametrize("status", [500, 502, 503, 504])
    def test_server_errors_may_have_created_it_and_are_settled_by_the_nonce(
        self, status: int
    ) -> None:
        error = delivery_error(http_error(status, {"message": "down"}), progress())
        assert (error.retryable, error.maybe_sent) == (True, True)

    def test_a_refused_connection_created_nothing(self) -> None:
        refused = aiohttp.ClientConnectorError(
            aiohttp.client_reqrep.ConnectionKey("h", 1, False, True, None, None, None),
            OSError(111, "refused"),
        )
        error = delivery_error(refused, progress())
        assert (error.retryable, error.maybe_sent) == (True, False)

    @pytest.mark.parametrize(
        "exc",
        [aiohttp.ServerDisconnectedError(), aiohttp.ClientOSError(104, "reset"), TimeoutError()],
    )
    def test_a_lost_answer_may_have_created_it(self, exc: Exception) -> None:
        error = delivery_error(exc, progress())
        assert (error.retryable, error.maybe_sent) == (True, True)

    def test_missing_permissions_is_final_and_says_what_to_grant(self) -> None:
        error = delivery_error(
            http_error(403, {"message": "Missing Permissions", "code": 50013}), progress()
        )
        assert (error.retryable, error.maybe_sent) == (False, False)
        assert "Send Messages" in str(error)
        assert "403" in str(error)

    def test_the_error_carries_what_was_delivered(self) -> None:
        error = delivery_error(discord.RateLimited(3), progress(2))
        assert (error.retryable, error.delivered_chunks, error.delivered_ids) == (
            True,
            2,
            ("0", "1"),
        )

    def test_a_refusal_while_unsettled_leaves_it_unsettled(self) -> None:
        error = delivery_error(
            http_error(403, {"message": "no", "code": 50013}), progress(unsettled=True)
        )
        assert (error.retryable, error.maybe_sent) == (False, True)

    def test_invalid_form_body_is_recognised(self) -> None:
        assert is_invalid_form(http_error(400, {"message": "Invalid Form Body", "code": 50035}))
        assert not is_invalid_form(http_error(400, {"message": "x", "code": 50006}))
        assert not is_invalid_form(discord.RateLimited(1))

    def test_login_failure_names_the_setting(self) -> None:
        assert "HUBBUB_DISCORD_TOKEN" in describe(discord.LoginFailure("bad"))

    def test_errors_survive_pickling(self) -> None:
        original = delivery_error(TimeoutError(), progress(1))
        error = pickle.loads(pickle.dumps(original))
        assert (error.retryable, error.retry_after, error.maybe_sent) == (True, None, True)
        assert (error.delivered_chunks, error.delivered_ids) == (1, ("0",))
