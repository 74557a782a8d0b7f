"""Back up and restore the embedded SQLite database with SQLite's online backup API.

A backup is one read transaction on the live database: under WAL it sees a consistent
snapshot while the gateway goes on writing, and blocks nobody. A restore writes the backup
into the database through the same API, page by page under SQLite's own locks, so the
database file, its WAL and its shared memory stay coherent; the file is never swapped
under an open connection. Both check that the file they read is a Hubbub database at a
schema revision this version of Hubbub knows.

A running embedded gateway holds a shared lock on ``<database>.lock``
(:func:`hold_database`); restore takes it exclusively, so it refuses while the gateway
runs (unless forced) and a gateway started meanwhile waits for the restore to finish.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from agent_core.db.migrations import head_revision, known_revision
from agent_core.errors import InvalidInput

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a restore waits for the live database's write lock between its steps."""
RESTORE_PAGES_PER_STEP = 1024
"""Pages a restore copies per step; the gateway's writers get the lock in between."""


class DatabaseInUse(Exception):
    """A gateway has the embedded database open; the message says what to do."""


@dataclass(frozen=True, slots=True)
class DatabaseFile:
    """A Hubbub SQLite database file that passed the checks."""

    path: Path
    revision: str
    """Its schema revision (``alembic_version``)."""
    size_bytes: int

    @property
    def current(self) -> bool:
        """Whether it is at this Hubbub's newest schema (else ``hubbub migrate`` brings it)."""
        return self.revision == head_revision()


def sqlite_path(url: str) -> Path:
    """The file of a SQLite database URL.

    Raises:
        InvalidInput: the URL is not a SQLite file (Postgres has its own tools).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise InvalidInput(
            "hubbub backup and restore are for the embedded SQLite database; this deployment "
            "uses " + parsed.get_backend_name() + ": use pg_dump / pg_restore (see the README)"
        )
    if not parsed.database or parsed.database == ":memory:":
        raise InvalidInput("the database is in memory: there is no file to back up or restore")
    return Path(parsed.database)


def _lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


@contextmanager
def hold_database(database: Path) -> Iterator[None]:
    """Mark the database as in use by this process (shared: several holders may run).

    Waits while a restore holds it.
    """
    database.parent.mkdir(parents=True, exist_ok=True)
    with _lock_path(database).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _exclusive(database: Path, *, force: bool) -> Iterator[None]:
    database.parent.mkdir(parents=True, exist_ok=True)
    with _lock_path(database).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not force:
                raise DatabaseInUse(
                    f"a Hubbub gateway is using {database}: stop it (hubbub up / hubbub "
                    "gateway) and restore again, or pass --force to restore into the running "
                    "database (then restart the gateway)"
                ) from None
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def inspect(path: Path) -> DatabaseFile:
    """Check that ``path`` is an intact Hubbub database at a known schema revision.

    Raises:
        InvalidInput: it is missing, not SQLite, damaged, not Hubbub's, or of a schema this
            version of Hubbub does not know (made by a newer one).
    """
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist")
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            (check,) = conn.execute("PRAGMA quick_check").fetchone()
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            revisions = (
                [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]
                if "alembic_version" in tables
                else []
            )
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{path} is not a SQLite database ({exc})") from exc
    if check != "ok":
        raise InvalidInput(f"{path} is damaged (SQLite's quick_check: {check})")
    if not revisions or "messages" not in tables:
        raise InvalidInput(f"{path} is not a Hubbub database (no Hubbub schema in it)")
    (revision,) = revisions
    if not known_revision(revision):
        raise InvalidInput(
            f"{path} is at schema revision {revision}, which this version of Hubbub does not "
            "know (a newer Hubbub made it): restore it with that version"
        )
    return DatabaseFile(path, revision, path.stat().st_size)


def backup(database: Path, target: Path, *, overwrite: bool = False) -> DatabaseFile:
    """Copy the live ``database`` to ``target`` as one consistent snapshot.

    The copy is written beside ``target`` and moved into place once it passed
    :func:`inspect`, so a failed backup leaves nothing half-written.

    Raises:
        InvalidInput: ``database`` is not a Hubbub database, ``target`` exists (and
            ``overwrite`` is off) or is the database itself.
    """
    inspect(database)
    if target.exists() and target.resolve() == database.resolve():
        raise InvalidInput("the backup cannot be the database itself")
    if target.exists() and not overwrite:
        raise InvalidInput(f"{target} exists: pick another name, or pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        with (
            closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as src,
            closing(sqlite3.connect(partial)) as dst,
        ):
            # One step: a single read transaction, so the copy is one snapshot even while
            # the gateway writes (a stepped copy would restart on every write).
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        copied = inspect(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return DatabaseFile(target, copied.revision, copied.size_bytes)


def restore(source: Path, database: Path, *, force: bool = False) -> DatabaseFile:
    """Write the backup ``source`` into ``database``, replacing everything in it.

    Raises:
        InvalidInput: ``source`` is not an intact Hubbub database of a known revision, or
            is the database itself; nothing was changed.
        DatabaseInUse: a gateway is using ``database`` and ``force`` is off.
    """
    checked = inspect(source)
    if database.exists() and source.resolve() == database.resolve():
        raise InvalidInput("the backup to restore is the database itself")
    with (
        _exclusive(database, force=force),
        closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as src,
        closing(sqlite3.connect(database, timeout=BUSY_TIMEOUT_SECONDS)) as dst,
    ):
        dst.execute("PRAGMA journal_mode=WAL")
        src.backup(dst, pages=RESTORE_PAGES_PER_STEP, sleep=0.05)
    return DatabaseFile(database, checked.revision, database.stat().st_size)
