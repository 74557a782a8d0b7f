"""The spine on the embedded default: web chat API in, litellm over HTTP to the fake provider,
reply out — on SQLite and on Postgres."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.llm_server import Failure, FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    conversation,
    hubbub_env,
    post_message,
    settings_from_env,
    wait_replies,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def env(db_url: str, fake_llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm)


@pytest.fixture
def gateway(env: dict[str, str], gateway_factory: Callable[..., GatewayServer]) -> GatewayServer:
    return gateway_factory(settings_from_env(env))


# The web chat user is ann; the status is the test's to check.
post = partial(post_message, user="ann")


class TestTurn:
    def test_message_in_reply_out(self, client: httpx.Client, fake_llm: FakeLLM) -> None:
        response = post(client, "c1", "hello there")
        assert response.status_code == 202
        accepted = response.json()
        assert accepted["duplicate"] is False
        (reply,) = wait_replies(client, "c1", 1)
        assert reply["text"] == "echo: [ann] hello there" or reply["text"] == "echo: hello there"
        lines = conversation(client, "c1")
        assert [m["role"] for m in lines] == ["user", "assistant"]
        assert lines[0]["id"] == accepted["id"]
        assert {"id", "role", "text", "created_at"} <= set(lines[1])
        assert lines[1]["html"] == f"<p>{reply['text']}</p>\n"
        assert lines[0]["html"] is None
        (request,) = fake_llm.chat_requests()
        assert request["model"] == "fake-model"
        assert request["messages"][0]["role"] == "system"
        assert request["messages"][-1] == {"role": "user", "content": "hello there"}

    def test_system_prompt_is_identical_across_turns(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        post(client, "c1", "first")
        wait_replies(client, "c1", 1)
        post(client, "c1", "second")
        wait_replies(client, "c1", 2)
        first, second = fake_llm.chat_requests()
        assert first["messages"][0]["content"] == second["messages"][0]["content"]
        assert [m["content"] for m in second["messages"][1:]] == [
            "first",
            "echo: first",
            "second",
        ]

    def test_same_message_id_twice_gives_one_reply(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        first = post(client, "c1", "once", id="platform-42")
        again = post(client, "c1", "once", id="platform-42")
        assert again.status_code == 202
        assert again.json() == first.json() | {"duplicate": True}
        wait_replies(client, "c1", 1)
        post(client, "c1", "next")
        wait_replies(client, "c1", 2)
        assert len(fake_llm.chat_requests()) == 2
        assert [m["text"] for m in conversation(client, "c1") if m["role"] == "user"] == [
            "once",
            "next",
        ]

    def test_messages_of_one_session_are_answered_in_arrival_order(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        fake_llm.delay = 0.05
        for i in range(6):
            assert post(client, "ordered", f"m{i}").status_code == 202
        wait_replies(client, "ordered", 6)
        asked = [r["messages"][-1]["content"] for r in fake_llm.chat_requests()]
        assert asked == [f"m{i}" for i in range(6)]
        for request in fake_llm.chat_requests():
            users = [m["content"] for m in request["messages"] if m["role"] == "user"]
            assert users == sorted(users), "a turn never sees later messages before its own"

    def test_different_sessions_run_in_parallel(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        # Each model request is held until four are in flight together (or a minute passes):
        # only turns of different sessions running side by side can get there.
        fake_llm.gather = 4
        for i in range(4):
            post(client, f"par{i}", "hi")
        for i in range(4):
            wait_replies(client, f"par{i}", 1)
        assert fake_llm.peak_in_flight == 4


class TestBadInput:
    @pytest.mark.parametrize(
        ("body", "status", "fragment"),
        [
            ({"text": ""}, 400, "empty"),
            ({"text": "   \n"}, 400, "empty"),
            ({"text": "x" * 32_001}, 413, "limit is 32,000"),
            ({"user": "ann"}, 422, "text"),
            ({"text": 5}, 422, "text"),
        ],
    )
    def test_refused_with_a_clear_message_and_nothing_stored(
        self, client: httpx.Client, body: dict[str, Any], status: int, fragment: str
    ) -> None:
        response = client.post("/api/webchat/bad/messages", json=body)
        assert response.status_code == status
        assert fragment in response.json()["error"]
        assert client.get("/api/webchat/bad/messages").status_code == 404

    def test_invalid_json(self, client: httpx.Client) -> None:
        response = client.post(
            "/api/webchat/bad/messages",
            content=b'{"text": "unterminated',
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 400
        assert "not valid JSON" in response.json()["error"]
        assert client.get("/api/webchat/bad/messages").status_code == 404

    @pytest.mark.parametrize("cid", ["has space", "x" * 65, "semi;colon"])
    def test_malformed_conversation_id(self, client: httpx.Client, cid: str) -> None:
        assert post(client, cid, "hi").status_code in (404, 422)

    def test_unknown_conversation(self, client: httpx.Client) -> None:
        response = client.get("/api/webchat/never-used/messages")
        assert response.status_code == 404
        assert "unknown conversation" in response.json()["error"]


class TestProviderErrors:
    def test_auth_failure_gives_a_short_notice_and_the_next_turn_works(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(Failure.unauthorized())
        post(client, "c1", "first")
        (notice,) = wait_replies(client, "c1", 1)
        assert notice["kind"] == "notice"
        assert "refused the API key" in notice["text"]
        post(client, "c1", "second")
        replies_ = wait_replies(client, "c1", 2)
        assert replies_[1]["text"] == "echo: second"
        last = fake_llm.chat_requests()[-1]["messages"]
        assert [m["content"] for m in last[1:]] == ["first", "second"], "notices stay out"

    def test_rate_limit_and_server_errors_are_retried(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(Failure.rate_limited(0), Failure.server_error())
        post(client, "c1", "persist")
        (reply,) = wait_replies(client, "c1", 1)
        assert reply["text"] == "echo: persist"
        assert len(fake_llm.chat_requests()) == 3

    def test_retries_are_bounded(self, client: httpx.Client, fake_llm: FakeLLM) -> None:
        fake_llm.fail_next(*[Failure.server_error()] * 5)
        post(client, "c1", "doomed")
        (notice,) = wait_replies(client, "c1", 1)
        assert "unavailable" in notice["text"]
        assert len(fake_llm.chat_requests()) == 3, "one call and HUBBUB_LLM_MAX_RETRIES=2"

    def test_a_hanging_provider_times_out_and_is_retried(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm, llm_timeout="0.5")
        gateway = gateway_factory(settings_from_env(env))
        fake_llm.delay = 3.0
        with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
            post(c, "slow", "are you there?")
            (notice,) = wait_replies(c, "slow", 1)
        assert "unavailable" in notice["text"]
        assert len(fake_llm.chat_requests()) == 3, "one call and HUBBUB_LLM_MAX_RETRIES=2"


class TestCommands:
    def test_help_is_answered_without_the_model(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        post(client, "c1", "/help")
        (reply,) = wait_replies(client, "c1", 1)
        assert "/new" in reply["text"]
        assert reply["kind"] == "command"
        assert fake_llm.chat_requests() == []

    def test_new_starts_a_fresh_session_and_keeps_the_old(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        post(client, "c1", "remember the old days")
        wait_replies(client, "c1", 1)
        post(client, "c1", "/new")
        wait_replies(client, "c1", 2)
        post(client, "c1", "fresh start")
        wait_replies(client, "c1", 3)
        last = fake_llm.chat_requests()[-1]["messages"]
        assert [m["content"] for m in last[1:]] == ["fresh start"]
        texts = [m["text"] for m in conversation(client, "c1")]
        assert "remember the old days" in texts
        assert "fresh start" in texts

    @pytest.mark.parametrize("typed", ["/teleport home", "/whatever"])
    def test_an_unknown_command_is_named_and_the_real_ones_listed(
        self, client: httpx.Client, fake_llm: FakeLLM, typed: str
    ) -> None:
        post(client, "c1", typed)
        (reply,) = wait_replies(client, "c1", 1)
        name = typed.split()[0]
        assert reply["text"].startswith(f"Unknown command {name} — commands: /help /new")
        assert "/compress" in reply["text"]
        assert reply["kind"] == "command"
        assert fake_llm.chat_requests() == []

    def test_in_a_group_an_unknown_command_not_addressed_stays_context(
        self, gateway: GatewayServer, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        from adapters.messages import InboundMessage

        def say(text: str, message_id: str, *, addressed: bool, command: str | None) -> None:
            gateway.runtime.intake.accept(
                InboundMessage(
                    platform="webchat",
                    chat_id="grp",
                    chat_type="group",
                    message_id=message_id,
                    sender_name="ann",
                    text=text,
                    addressed=addressed,
                    command=command,
                )
            )

        say("/roll d20", "grp:1", addressed=False, command="roll")  # another bot's command
        say("what did I roll?", "grp:2", addressed=True, command=None)
        wait_replies(client, "grp", 1)
        (request,) = fake_llm.chat_requests()
        assert [m["content"] for m in request["messages"][1:]] == [
            "[ann] /roll d20",
            "[ann] what did I roll?",
        ]
        say("/roll d6", "grp:3", addressed=True, command="roll")  # asked of this bot
        unknown = wait_replies(client, "grp", 2)[1]
        assert unknown["text"].startswith("Unknown command /roll")
        assert len(fake_llm.chat_requests()) == 1

    def test_usage_reports_the_window(self, client: httpx.Client) -> None:
        post(client, "c1", "hi")
        wait_replies(client, "c1", 1)
        post(client, "c1", "/usage")
        usage = wait_replies(client, "c1", 2)[1]["text"]
        assert "of 128,000 tokens" in usage


class TestNoModel:
    def test_page_and_api_explain_what_to_set(
        self,
        db_url: str,
        tmp_path: Path,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(db_url=db_url, home=tmp_path, fake=None)
        gateway = gateway_factory(settings_from_env(env))
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            status = client.get("/api/webchat/status").json()
            assert status["model_configured"] is False
            assert "HUBBUB_MODEL" in status["setup_hint"]
            page = client.get("/")
            assert page.status_code == 200
            assert "Hubbub" in page.text
            assert post(client, "c1", "anyone there?").status_code == 202
            (notice,) = wait_replies(client, "c1", 1)
            assert "HUBBUB_MODEL" in notice["text"]
            assert client.get("/healthz").json() == {"status": "ok"}


class TestServiceEndpoints:
    def test_ready_and_metrics(self, client: httpx.Client) -> None:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["broker"] == "embedded"
        post(client, "c1", "count me")
        wait_replies(client, "c1", 1)
        metrics = client.get("/metrics").text
        for name in (
            "hubbub_inbound_messages_total",
            "hubbub_turns_total",
            "hubbub_turn_seconds_bucket",
            "hubbub_turn_overhead_seconds_bucket",
            "hubbub_llm_tokens_total",
            "hubbub_errors_total",
        ):
            assert name in metrics

    def test_not_ready_when_the_broker_is_down(
        self,
        db_url: str,
        tmp_path: Path,
        fake_llm: FakeLLM,
        gateway_factory: Callable[..., GatewayServer],
    ) -> None:
        env = hubbub_env(
            db_url=db_url, home=tmp_path, fake=fake_llm, redis_url="redis://127.0.0.1:1/0"
        )
        gateway = gateway_factory(settings_from_env(env))
        response = httpx.get(f"{gateway.base_url}/readyz", timeout=30)
        assert response.status_code == 503
        assert "broker unreachable" in response.json()["reasons"][0]


class TestThreads:
    def test_a_new_thread_starts_with_the_message_it_grew_from(
        self, gateway: GatewayServer, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        from adapters.messages import InboundMessage

        def say(text: str, message_id: str, **kw: Any) -> None:
            gateway.runtime.intake.accept(
                InboundMessage(
                    platform="webchat",
                    chat_id="chan",
                    chat_type="group",
                    message_id=message_id,
                    sender_name="ann",
                    text=text,
                    addressed=True,
                    **kw,
                )
            )

        say("how do I rotate the keys?", "chan:1")
        wait_replies(client, "chan", 1)
        say("and for staging?", "chan:2", thread_id="chan:1", reply_to_message_id="chan:1")
        wait_until(lambda: len(fake_llm.chat_requests()) == 2, what="thread turn")
        thread_request = fake_llm.chat_requests()[1]["messages"]
        assert [m["content"] for m in thread_request[1:]] == [
            "[ann] how do I rotate the keys?",
            "echo: [ann] how do I rotate the keys?",
            "[ann] and for staging?",
        ]
