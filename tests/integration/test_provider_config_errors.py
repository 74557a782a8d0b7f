"""A wrong model setting is named in the chat, with what to set; outages are not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.llm_server import Failure, FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    free_port,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def notice_for(
    sqlite_url: str,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., str]:
    """The reply to one message on a gateway whose env is changed by ``drop`` / ``extra``."""
    for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(variable, raising=False)

    def ask(*, drop: tuple[str, ...] = (), **extra: Any) -> str:
        env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, **extra)
        for key in drop:
            del env[key]
        gateway = gateway_factory(settings_from_env(env))
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            post_accepted(client, "cfg", "hello")
            (reply,) = wait_replies(client, "cfg", 1)
        assert reply["kind"] == "notice"
        text: str = reply["text"]
        return text

    return ask


def test_local_server_without_a_key_names_the_key(
    notice_for: Callable[..., str], fake_llm: FakeLLM
) -> None:
    text = notice_for(drop=("HUBBUB_LLM_API_KEY",))
    assert "no API key is configured" in text
    assert "set HUBBUB_LLM_API_KEY (or OPENAI_API_KEY)" in text
    assert "any string will do for a local server" in text
    assert "unavailable" not in text
    assert fake_llm.chat_requests() == [], "the client refused before sending"


def test_refused_key_is_named_and_not_retried(
    notice_for: Callable[..., str], fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(Failure.unauthorized())
    text = notice_for()
    assert "refused the API key" in text
    assert "set HUBBUB_LLM_API_KEY (or OPENAI_API_KEY) to a key the provider accepts" in text
    assert len(fake_llm.chat_requests()) == 1


def test_unknown_model_is_named_and_not_retried(
    notice_for: Callable[..., str], fake_llm: FakeLLM
) -> None:
    fake_llm.fail_when = lambda body: Failure(
        404,
        f"The model `{body['model']}` does not exist or you do not have access to it.",
        "model_not_found",
    )
    text = notice_for()
    assert "does not know the model openai/fake-model" in text
    assert "set HUBBUB_MODEL to a model the provider serves" in text
    assert len(fake_llm.chat_requests()) == 1


def test_dead_api_base_names_the_setting(notice_for: Callable[..., str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    text = notice_for(llm_api_base=dead)
    assert "the configured model server does not answer" in text
    assert f"start the model server at {dead} or correct HUBBUB_LLM_API_BASE" in text


def test_an_outage_still_asks_to_try_again(
    notice_for: Callable[..., str], fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(*[Failure.server_error()] * 5)
    text = notice_for()
    assert "unavailable right now. Please try again in a moment." in text
    assert "configuration" not in text
