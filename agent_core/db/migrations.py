"""Run and inspect the Alembic migrations in the repository's ``alembic/`` folder."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from agent_core.db.engine import create_db_engine
from alembic import command

REPO_ROOT = Path(__file__).resolve().parents[2]
ALEMBIC_INI = REPO_ROOT / "alembic.ini"


def _config(url: str) -> Config:
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.attributes["url"] = url
    return config


def upgrade_to_head(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (``alembic upgrade head``)."""
    command.upgrade(_config(url), "head")


def head_revision() -> str | None:
    """The newest migration in the repository."""
    return ScriptDirectory.from_config(_config("sqlite://")).get_current_head()


def current_revision(url: str) -> str | None:
    """The schema version the database is at; ``None`` when it was never migrated."""
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def known_revision(revision: str) -> bool:
    """Whether ``revision`` is one of the repository's migrations (older or the head)."""
    from alembic.util import CommandError

    script = ScriptDirectory.from_config(_config("sqlite://"))
    try:
        found = script.get_revision(revision)
    except CommandError:
        return False
    # Alembic also accepts a unique prefix; a stored revision is always the whole id.
    return found is not None and found.revision == revision
