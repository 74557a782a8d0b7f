"""Admin API keys from the CLI: shown once, stored hashed, listed without the secret, revoked."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from agent_core.admin import keys
from agent_core.db.engine import create_db_engine, make_session_factory, transaction
from agent_core.db.models import ApiKey, AuditEvent
from gateway.cli import app
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import hubbub_env

pytestmark = pytest.mark.integration


@pytest.fixture
def factory(db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = create_db_engine(db_url)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture
def cli(
    db_url: str, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., str]:
    for key, value in hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    return run


def test_a_created_key_is_shown_once_stored_hashed_and_verifies(
    cli: Callable[..., str], factory: sessionmaker[Session]
) -> None:
    cli("tenants", "add", "acme")
    secret = cli("keys", "create", "--tenant", "acme", "--scope", "read").splitlines()[-1]
    assert secret.startswith("hbk_")
    assert len(secret) > 40

    with transaction(factory) as db:
        stored = db.scalars(select(ApiKey)).one()
        assert stored.prefix == secret[:12]
        assert stored.key_hash == hashlib.sha256(secret.encode()).hexdigest()
        assert secret not in repr(db.execute(select(ApiKey.__table__)).all())
        caller = keys.verify(db, secret)
        assert caller == keys.Caller(prefix=secret[:12], tenant_id="acme", scope=keys.Scope.READ)
        assert keys.verify(db, secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
        assert keys.verify(db, "hbk_nonsense") is None
        assert stored.last_used_at is not None

    listing = cli("keys", "list", "--tenant", "acme")
    assert secret[:12] in listing
    assert secret not in listing
    assert "last used" in listing

    cli("keys", "revoke", secret[:12])
    with transaction(factory) as db:
        assert keys.verify(db, secret) is None
        actions = [e.action for e in db.scalars(select(AuditEvent).order_by(AuditEvent.id))]
        assert actions == ["key.create", "key.revoke"]
        assert all(secret not in str(e.after) for e in db.scalars(select(AuditEvent)))
    assert "revoked" in cli("keys", "list")
    cli("keys", "revoke", "hbk_unknown0", code=1)


def test_operator_keys_and_bad_requests(cli: Callable[..., str]) -> None:
    secret = cli("keys", "create", "--operator").splitlines()[-1]
    assert secret.startswith("hbk_")
    assert "(operator)" in cli("keys", "list")
    cli("keys", "create", code=2)
    cli("keys", "create", "--tenant", "default", "--operator", code=2)
    cli("keys", "create", "--tenant", "nobody", code=2)
    cli("keys", "create", "--tenant", "default", "--scope", "root", code=2)


def test_last_used_is_written_at_most_once_a_minute(
    cli: Callable[..., str], factory: sessionmaker[Session]
) -> None:
    secret = cli("keys", "create", "--tenant", "default").splitlines()[-1]
    with transaction(factory) as db:
        assert keys.verify(db, secret) is not None
        first = db.scalars(select(ApiKey)).one().last_used_at
        assert first is not None
        keys.verify(db, secret, now=first + timedelta(seconds=30))
        assert db.scalars(select(ApiKey)).one().last_used_at == first
        keys.verify(db, secret, now=first + timedelta(seconds=61))
        assert db.scalars(select(ApiKey)).one().last_used_at == first + timedelta(seconds=61)
