"""Migration 0019 adds ``sessions.model`` and takes it away again, on SQLite and Postgres."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.config import Config

from agent_core.db.engine import create_db_engine
from agent_core.db.migrations import ALEMBIC_INI, REPO_ROOT, current_revision
from alembic import command

pytestmark = pytest.mark.integration


def _config(url: str) -> Config:
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.attributes["url"] = url
    return config


def _session_columns(url: str) -> set[str]:
    engine = create_db_engine(url)
    try:
        return {column["name"] for column in sa.inspect(engine).get_columns("sessions")}
    finally:
        engine.dispose()


def test_the_session_model_column_goes_down_and_up_again(db_url: str) -> None:
    assert "model" in _session_columns(db_url)

    command.downgrade(_config(db_url), "0018_i_media")
    assert current_revision(db_url) == "0018_i_media"
    assert "model" not in _session_columns(db_url)

    command.upgrade(_config(db_url), "0019_r_session_model")
    assert current_revision(db_url) == "0019_r_session_model"
    assert "model" in _session_columns(db_url)
    command.upgrade(_config(db_url), "head")
