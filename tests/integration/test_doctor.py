"""``hubbub doctor`` says what is wrong and how to fix it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_core.db.migrations import head_revision
from gateway.cli import app
from tests.fixtures.llm_server import Failure, FakeLLM
from tests.fixtures.services import free_port, hubbub_env

pytestmark = pytest.mark.integration


@pytest.fixture
def doctor(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, str]], tuple[int, str]]:
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)

    def run(env: dict[str, str]) -> tuple[int, str]:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        result = CliRunner().invoke(app, ["doctor"])
        return result.exit_code, result.output

    return run


def test_healthy_setup(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    code, out = doctor(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    assert code == 0, out
    assert f"[ok  ] database: sqlite reachable, schema at {head_revision()}" in out
    assert "[ok  ] broker: embedded" in out
    assert "[ok  ] context window: 128,000 tokens" in out
    assert "[ok  ] tokenizer: cl100k_base loads offline" in out


def test_no_model_is_a_failure_with_the_fix(
    doctor: Callable, sqlite_url: str, tmp_path: Path
) -> None:
    code, out = doctor(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=None))
    assert code == 1
    assert "[FAIL] model: HUBBUB_MODEL is not set" in out
    assert "fix: set HUBBUB_MODEL" in out


def test_unmigrated_database_and_dead_broker(
    doctor: Callable, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = hubbub_env(
        db_url=f"sqlite:///{tmp_path / 'empty.db'}",
        home=tmp_path,
        fake=fake_llm,
        redis_url="redis://127.0.0.1:1/0",
    )
    code, out = doctor(env)
    assert code == 1
    assert "schema is at nothing" in out
    assert "fix: run `hubbub migrate`" in out
    assert "[FAIL] broker: Redis at HUBBUB_REDIS_URL does not answer" in out


def test_unknown_model_window_is_a_warning(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm)
    del env["HUBBUB_CONTEXT_LENGTH"]
    code, out = doctor(env)
    assert code == 0
    assert "[warn] context window: litellm does not know the window of openai/fake-model" in out
    assert "HUBBUB_CONTEXT_LENGTH" in out


@pytest.fixture
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(variable, raising=False)


def test_healthy_setup_proves_the_model_answers(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    code, out = doctor(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    assert code == 0, out
    assert f"[ok  ] model answers: openai/fake-model answered at {fake_llm.base_url}" in out
    (probe,) = fake_llm.chat_requests()
    assert probe["max_tokens"] == 1


@pytest.mark.usefixtures("no_provider_keys")
def test_missing_required_key_fails(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm)
    del env["HUBBUB_LLM_API_KEY"]
    code, out = doctor(env)
    assert code == 1, out
    assert "[FAIL] credentials: no API key for openai/fake-model: OPENAI_API_KEY not set" in out
    assert "fix: set HUBBUB_LLM_API_KEY or OPENAI_API_KEY (any string will do" in out


def test_unknown_model_fails(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.fail_when = lambda body: Failure(
        404, f"The model `{body['model']}` does not exist.", "model_not_found"
    )
    code, out = doctor(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    assert code == 1, out
    assert "[FAIL] model answers: openai/fake-model (404): The model `fake-model` does not" in out
    assert "fix: set HUBBUB_MODEL to a model the provider serves" in out


def test_refused_key_fails(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(Failure.unauthorized())
    code, out = doctor(hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm))
    assert code == 1, out
    assert "[FAIL] model answers: openai/fake-model (401): " in out
    assert "to a key the provider accepts" in out


def test_dead_api_base_fails(
    doctor: Callable, sqlite_url: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, llm_api_base=dead)
    code, out = doctor(env)
    assert code == 1, out
    assert "[FAIL] model answers: openai/fake-model" in out
    assert f"fix: start the model server at {dead} or correct HUBBUB_LLM_API_BASE" in out


@pytest.mark.parametrize("url", ["postgres//nohost", "postgresql+nodriver://u@h/db"])
def test_malformed_database_url_is_one_line(
    doctor: Callable, tmp_path: Path, fake_llm: FakeLLM, url: str
) -> None:
    code, out = doctor(hubbub_env(db_url=url, home=tmp_path, fake=fake_llm))
    assert code == 1, out
    (line,) = [line for line in out.splitlines() if "database" in line and "FAIL" in line]
    assert line.startswith("[FAIL] database: HUBBUB_DATABASE_URL is not a valid URL: ")
    assert "Traceback" not in out
    assert len(out.splitlines()) < 15
