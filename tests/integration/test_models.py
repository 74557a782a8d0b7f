"""Models: provider fallback through litellm's Router, ``/model``, a tenant's own models.

Two fake providers over real HTTP: the main model (``openai/fake-model``) on the shared
fake, the fallback (``openai/fake-b``) on its own server (``HUBBUB_MODEL_ENDPOINTS``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from agent_core.admin import keys
from agent_core.config import DEFAULT_CONTEXT_LENGTH
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.models import DEFAULT_TENANT_ID, ChatSession, UsageRecord
from agent_core.tenancy.repository import TenancyRepository
from gateway.routes.admin import PREFIX
from tests.fixtures.llm_server import Failure, FakeLLM, LLMServerThread
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

MAIN = "openai/fake-model"
SECOND = "openai/fake-b"
FALLBACK_BOUND_SECONDS = 30.0
"""Generous on a loaded machine; waiting out the primary's Retry-After: 60 would exceed it."""

PRICES = {
    MAIN: {"input": 0.00001, "output": 0.00003},
    SECOND: {"input": 0.000001, "output": 0.000002},
}
"""HUBBUB_MODEL_COSTS: the fallback costs a tenth of the main model or less."""

MAIN_WINDOW = 200_000
"""HUBBUB_CONTEXT_LENGTH: the main model's window; litellm knows none for the fakes, so the
second model has the conservative default."""

post = partial(post_accepted, user="ann")


@pytest.fixture(scope="module")
def _second_server() -> Iterator[FakeLLM]:
    server = LLMServerThread()
    fake = server.start()
    yield fake
    server.stop()


@pytest.fixture
def second_llm(_second_server: FakeLLM) -> Iterator[FakeLLM]:
    """The fallback model's own fake provider, reset for each test."""
    _second_server.reset()
    yield _second_server
    _second_server.reset()


def _env(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, second_llm: FakeLLM, **extra: str
) -> dict[str, str]:
    return hubbub_env(
        db_url=db_url,
        home=tmp_path,
        fake=fake_llm,
        model_endpoints=json.dumps({SECOND: second_llm.base_url}),
        context_length=str(MAIN_WINDOW),
        **extra,
    )


@pytest.fixture
def with_fallback(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    second_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[httpx.Client]:
    """A gateway whose main model falls back to the second (timeout 2 s for the hang case)."""
    env = _env(db_url, tmp_path, fake_llm, second_llm, fallback_models=SECOND, llm_timeout="2")
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
        yield c


def _admin_key(db_url: str) -> str:
    """A new admin key of the default tenant (the web chat's)."""
    engine = create_db_engine(db_url)
    try:
        with transaction(make_session_factory(engine)) as db:
            TenancyRepository.from_session(db).ensure_default_tenant()
            return keys.create(db, tenant_id=DEFAULT_TENANT_ID, scope="admin").secret
    finally:
        engine.dispose()


def _usage_rows(db_url: str) -> list[UsageRecord]:
    engine = create_db_engine(db_url)
    try:
        with transaction(make_session_factory(engine)) as db:
            rows = list(db.scalars(select(UsageRecord).order_by(UsageRecord.id)))
            db.expunge_all()
            return rows
    finally:
        engine.dispose()


@pytest.fixture
def priced_fallback(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    second_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> Iterator[httpx.Client]:
    """A gateway whose main model falls back to the second, each at its own price."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(PRICES))
    env = _env(
        db_url, tmp_path, fake_llm, second_llm, fallback_models=SECOND, model_costs=str(costs)
    )
    gateway = gateway_factory(settings_from_env(env))
    with httpx.Client(base_url=gateway.base_url, timeout=30) as c:
        c.headers["Authorization"] = f"Bearer {_admin_key(db_url)}"
        yield c


class TestFallbackCharges:
    @pytest.mark.parametrize(
        "failure",
        [Failure.server_error(), Failure.rate_limited(60)],
        ids=["5xx-storm", "429-retry-after"],
    )
    def test_the_fallback_s_answer_is_charged_to_it_at_its_price(
        self,
        db_url: str,
        priced_fallback: httpx.Client,
        fake_llm: FakeLLM,
        second_llm: FakeLLM,
        failure: Failure,
    ) -> None:
        fake_llm.fail_next(*[failure] * 5)
        post(priced_fallback, "c1", "who pays?")
        (reply,) = wait_replies(priced_fallback, "c1", 1, timeout=FALLBACK_BOUND_SECONDS)
        assert reply["text"] == "echo: who pays?"
        (usage,) = second_llm.usages
        assert fake_llm.usages == [], "the main model answered nothing"

        (row,) = _usage_rows(db_url)
        assert row.model == SECOND
        assert (row.prompt_tokens, row.completion_tokens) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )
        price = PRICES[SECOND]
        expected = usage["prompt_tokens"] * price["input"] + (
            usage["completion_tokens"] * price["output"]
        )
        assert row.cost_known
        assert row.cost_usd == pytest.approx(expected)

        report = priced_fallback.get(
            f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/usage", params={"group_by": "model"}
        )
        assert report.status_code == 200, report.text
        rows = report.json()["rows"]
        assert [(r["key"], r["calls"]) for r in rows] == [(SECOND, 1)]
        assert rows[0]["cost_usd"] == pytest.approx(expected)


class TestFallback:
    def test_a_long_retry_after_moves_to_the_fallback_instead_of_waiting(
        self, with_fallback: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(*[Failure.rate_limited(60)] * 5)
        post(with_fallback, "c1", "anyone there?")
        # Answered within a bound shorter than the Retry-After: nobody slept on it.
        (reply,) = wait_replies(with_fallback, "c1", 1, timeout=FALLBACK_BOUND_SECONDS)
        assert reply["text"] == "echo: anyone there?"
        assert len(fake_llm.chat_requests()) == 1, "the rate-limited model is asked once"
        (request,) = second_llm.chat_requests()
        assert request["model"] == "fake-b"

    def test_a_5xx_storm_moves_to_the_fallback(
        self, with_fallback: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(*[Failure.server_error()] * 5)
        post(with_fallback, "c1", "still up?")
        (reply,) = wait_replies(with_fallback, "c1", 1)
        assert reply["text"] == "echo: still up?"
        assert len(fake_llm.chat_requests()) == 1, "no retry on a model that has a fallback"
        assert len(second_llm.chat_requests()) == 1

    def test_a_hanging_model_times_out_into_the_fallback(
        self, with_fallback: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        fake_llm.sleep_next(60, times=5)
        post(with_fallback, "c1", "hello?")
        (reply,) = wait_replies(with_fallback, "c1", 1)
        assert reply["text"] == "echo: hello?"
        assert len(second_llm.chat_requests()) == 1

    def test_when_every_model_fails_the_chat_is_told_which(
        self, with_fallback: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(*[Failure.server_error()] * 5)
        second_llm.fail_next(*[Failure.server_error()] * 5)
        post(with_fallback, "c1", "doomed")
        (notice,) = wait_replies(with_fallback, "c1", 1)
        assert notice["kind"] == "notice"
        assert MAIN in notice["text"], notice["text"]
        assert SECOND in notice["text"], notice["text"]
        assert "unavailable" in notice["text"]
        assert len(fake_llm.chat_requests()) == 1
        assert len(second_llm.chat_requests()) == 3, "the last model: HUBBUB_LLM_MAX_RETRIES=2"

    def test_without_a_fallback_the_error_names_the_model(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        fake_llm.fail_next(*[Failure.server_error()] * 5)
        post(client, "c1", "doomed")
        (notice,) = wait_replies(client, "c1", 1)
        assert f"could not answer with {MAIN}:" in notice["text"], notice["text"]
        assert "unavailable" in notice["text"]


@pytest.fixture
def gateway(
    db_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    second_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    """Two allowed models, no fallback (``client`` from tests.fixtures.services)."""
    env = _env(db_url, tmp_path, fake_llm, second_llm, models=f"{MAIN},{SECOND}")
    return gateway_factory(settings_from_env(env))


def _session_row(db_url: str) -> ChatSession:
    engine = create_db_engine(db_url)
    try:
        with transaction(make_session_factory(engine)) as db:
            (row,) = db.query(ChatSession).filter_by(chat_id="c1", is_current=True).all()
            db.expunge(row)
            return row
    finally:
        engine.dispose()


class TestModelCommand:
    def test_lists_the_models_with_the_current_one_marked(
        self, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        post(client, "c1", "/model")
        (reply,) = wait_replies(client, "c1", 1)
        assert reply["kind"] == "command"
        assert f"- {MAIN} (current)" in reply["text"]
        assert f"- {SECOND}\n" in reply["text"]
        assert fake_llm.chat_requests() == []

    def test_switches_the_session_and_its_window(
        self, db_url: str, client: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        post(client, "c1", "first")
        wait_replies(client, "c1", 1)
        before = _session_row(db_url)
        post(client, "c1", f"/model {SECOND}")
        (_, switched) = wait_replies(client, "c1", 2)
        assert f"now uses {SECOND}" in switched["text"]
        post(client, "c1", "second")
        (*_, answer) = wait_replies(client, "c1", 3)
        assert answer["text"] == "echo: second"
        assert len(fake_llm.chat_requests()) == 1
        (request,) = second_llm.chat_requests()
        assert request["model"] == "fake-b"
        assert [m["content"] for m in request["messages"][1:]] == ["first", "echo: first", "second"]
        after = _session_row(db_url)
        assert after.model == SECOND
        assert after.prompt_fingerprint != before.prompt_fingerprint, "rebuilt once"
        post(client, "c1", "/usage")
        (*_, usage) = wait_replies(client, "c1", 4)
        assert f"of {DEFAULT_CONTEXT_LENGTH:,} tokens" in usage["text"], usage["text"]
        post(client, "c1", "third")
        wait_replies(client, "c1", 5)
        assert _session_row(db_url).prompt_fingerprint == after.prompt_fingerprint

    def test_an_unknown_name_lists_the_models_and_changes_nothing(
        self, db_url: str, client: httpx.Client, fake_llm: FakeLLM
    ) -> None:
        post(client, "c1", "/model openai/gpt-9")
        (reply,) = wait_replies(client, "c1", 1)
        assert "no model 'openai/gpt-9'" in reply["text"]
        assert f"- {MAIN} (current)" in reply["text"]
        assert _session_row(db_url).model is None
        post(client, "c1", "hi")
        wait_replies(client, "c1", 2)
        assert len(fake_llm.chat_requests()) == 1


@pytest.fixture
def admin(db_url: str, client: httpx.Client) -> httpx.Client:
    """``client`` with an admin key of the default tenant (the web chat's)."""
    client.headers["Authorization"] = f"Bearer {_admin_key(db_url)}"
    return client


class TestTenantModels:
    URL = f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/settings"

    def test_round_trip_and_the_default_reaches_new_sessions(
        self, admin: httpx.Client, fake_llm: FakeLLM, second_llm: FakeLLM
    ) -> None:
        body = {"name": "Default", "models": [SECOND], "default_model": SECOND}
        response = admin.put(self.URL, json=body)
        assert response.status_code == 200, response.text
        shown = admin.get(self.URL).json()
        assert shown["models"] == [SECOND]
        assert shown["default_model"] == SECOND
        post(admin, "c1", "hello")
        (reply,) = wait_replies(admin, "c1", 1)
        assert reply["text"] == "echo: hello"
        assert fake_llm.chat_requests() == []
        assert len(second_llm.chat_requests()) == 1
        post(admin, "c1", "/model")
        (_, listing) = wait_replies(admin, "c1", 2)
        assert f"- {SECOND} (current)" in listing["text"]
        assert MAIN not in listing["text"], "the tenant's list narrows the deployment's"

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"models": ["openai/gpt-9"]}, "model 'openai/gpt-9' is not offered"),
            ({"default_model": "openai/gpt-9"}, "model 'openai/gpt-9' is not offered"),
            ({"models": [MAIN], "default_model": SECOND}, "is not in the tenant's models"),
        ],
    )
    def test_a_bad_model_is_refused_and_changes_nothing(
        self, admin: httpx.Client, change: dict[str, object], message: str
    ) -> None:
        before = admin.get(self.URL).json()
        response = admin.put(self.URL, json={"name": "Default"} | change)
        assert response.status_code == 422, response.text
        assert message in response.text
        assert admin.get(self.URL).json() == before

    def test_the_session_gauge_follows_the_session_s_model(self, admin: httpx.Client) -> None:
        post(admin, "c1", "hello")
        wait_replies(admin, "c1", 1)
        sessions = f"{PREFIX}/tenants/{DEFAULT_TENANT_ID}/sessions"
        (listed,) = admin.get(sessions, params={"chat": "c1"}).json()
        before = admin.get(f"{sessions}/{listed['id']}").json()["gauge"]
        assert (before["model"], before["window"]) == (MAIN, MAIN_WINDOW)
        post(admin, "c1", f"/model {SECOND}")
        wait_replies(admin, "c1", 2)
        after = admin.get(f"{sessions}/{listed['id']}").json()["gauge"]
        assert (after["model"], after["window"]) == (SECOND, DEFAULT_CONTEXT_LENGTH)
        assert after["threshold"] < before["threshold"]
        assert after["hygiene"] < before["hygiene"]
