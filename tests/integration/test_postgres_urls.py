"""The Postgres URL a host hands out works as it is: psycopg 3 is the default driver."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from agent_core.db.engine import create_db_engine
from gateway.cli import app
from tests.fixtures.database import POSTGRES_ADMIN_URL, _admin_execute, _worker
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration
_counter = itertools.count()


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A new, empty Postgres database; its plain ``postgresql://`` URL."""
    name = f"hubbub_url_{_worker()}_{next(_counter)}"
    _admin_execute(f"CREATE DATABASE {name}")
    yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize(
    ("scheme", "driver"),
    [("postgresql", "psycopg"), ("postgres", "psycopg"), ("postgresql+psycopg2", "psycopg2")],
)
def test_url_form_migrates_and_answers(
    scheme: str,
    driver: str,
    empty_database: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = scheme + empty_database.removeprefix("postgresql")
    env = hubbub_env(db_url=url, home=tmp_path, fake=fake_llm)
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    migrated = CliRunner().invoke(app, ["migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert "Database schema is up to date." in migrated.output

    settings = settings_from_env(env)
    engine = create_db_engine(settings.resolved_database_url)
    try:
        assert engine.dialect.driver == driver
    finally:
        engine.dispose()
    gateway = gateway_factory(settings)
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        post_accepted(client, "pg", "héllo ✓")
        (reply,) = wait_replies(client, "pg", 1)
    assert reply["text"] == "echo: héllo ✓"
