"""Per-session leases in the database: one atomic statement to take, renew or release.

The same code runs on Postgres and SQLite (``INSERT ... ON CONFLICT DO UPDATE ... WHERE``):

* ``acquire`` succeeds when nobody holds the lease, the holder's lease expired, or the
  caller already holds it (re-entrant, and it extends the lease);
* ``renew`` extends only the caller's own, unexpired-or-not, lease and reports whether the
  caller still holds it;
* ``release`` deletes only the caller's lease; a non-holder's release is a no-op.

A holder that dies simply stops renewing; its lease expires and the next caller takes it
over. Each call runs in its own short transaction, so no database transaction stays open
while the lease is held (no idle-in-transaction during an LLM call). Those commits are not
waited to disk: a lease lost in a database crash is no worse than a holder that died, and
the work it guards is idempotent on its own.

Errors: a database error inside these functions propagates to the caller unchanged. Callers
decide: the turn pipeline lets the task fail and the sweeper retries it; compaction treats
an error like a busy lease and leaves the transcript as it is (fail closed).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType
from typing import Any, cast

from sqlalchemy import Executable, Table, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from agent_core.db.base import utcnow
from agent_core.db.engine import transaction, write_first
from agent_core.db.tables import LOCKS, param

log = logging.getLogger(__name__)

TURN = "turn"
COMPACTION = "compaction"
RENEWALS_PER_LEASE = 4
"""A held lease is renewed this many times per lease period (an 8 s lease every 2 s)."""


def owner_identity() -> str:
    """A lease owner name that says which process holds it, unique per holding."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _upsert(insert: Callable[[Table], Any]) -> Executable:
    """Take the lease if it is free, expired, or already the caller's; returns the owner."""
    values = insert(LOCKS).values(
        session_id=param("sid", LOCKS.c.session_id),
        kind=param("lock_kind", LOCKS.c.kind),
        owner=param("holder", LOCKS.c.owner),
        expires_at=param("expires", LOCKS.c.expires_at),
        acquired_at=param("now", LOCKS.c.acquired_at),
    )
    return cast(
        Executable,
        values.on_conflict_do_update(
            index_elements=[LOCKS.c.session_id, LOCKS.c.kind],
            set_={
                "owner": values.excluded.owner,
                "expires_at": values.excluded.expires_at,
                "acquired_at": values.excluded.acquired_at,
            },
            where=(LOCKS.c.expires_at <= param("now", LOCKS.c.expires_at))
            | (LOCKS.c.owner == param("holder", LOCKS.c.owner)),
        ).returning(LOCKS.c.owner),
    )


_UPSERT = {"postgresql": _upsert(postgresql.insert), "sqlite": _upsert(sqlite.insert)}
_HOLDER = (
    LOCKS.c.session_id == param("sid", LOCKS.c.session_id),
    LOCKS.c.kind == param("lock_kind", LOCKS.c.kind),
    LOCKS.c.owner == param("holder", LOCKS.c.owner),
)
_RENEW = update(LOCKS).where(*_HOLDER).values(expires_at=param("expires", LOCKS.c.expires_at))
_RELEASE = delete(LOCKS).where(*_HOLDER)


def acquire(
    factory: sessionmaker[Session], session_id: str, kind: str, owner: str, seconds: float
) -> bool:
    """Take (or extend) the lease; ``True`` when ``owner`` holds it afterwards."""
    with transaction(factory, durable=False) as db:
        return try_acquire(db, session_id, kind, owner, seconds)


def busy(factory: sessionmaker[Session], session_id: str, kind: str) -> bool:
    """Whether anyone holds the session's ``kind`` lease right now (one indexed read)."""
    with transaction(factory, durable=False) as db:
        found = db.execute(
            select(LOCKS.c.owner).where(
                LOCKS.c.session_id == session_id,
                LOCKS.c.kind == kind,
                LOCKS.c.expires_at > utcnow(),
            )
        ).first()
    return found is not None


def try_acquire(db: Session, session_id: str, kind: str, owner: str, seconds: float) -> bool:
    """:func:`acquire` inside the caller's transaction (it commits with the caller's work)."""
    now = utcnow()
    params = {
        "sid": session_id,
        "lock_kind": kind,
        "holder": owner,
        "expires": now + timedelta(seconds=seconds),
        "now": now,
    }
    return db.execute(_UPSERT[db.get_bind().dialect.name], params).first() is not None


def renew(
    factory: sessionmaker[Session], session_id: str, kind: str, owner: str, seconds: float
) -> bool:
    """Extend the caller's lease; ``False`` when someone else holds it now.

    The renewal goes before the process's other waiting writers, and the new expiry counts
    from when the write can be made (on SQLite, once the write lock is taken), so time spent
    waiting for the database is not taken out of the lease.
    """
    with write_first(), transaction(factory, durable=False) as db:
        db.connection()
        params = {
            "sid": session_id,
            "lock_kind": kind,
            "holder": owner,
            "expires": utcnow() + timedelta(seconds=seconds),
        }
        return bool(db.execute(_RENEW, params).rowcount)  # type: ignore[attr-defined]


def release(factory: sessionmaker[Session], session_id: str, kind: str, owner: str) -> bool:
    """Drop the caller's lease; ``False`` (and nothing changed) for a non-holder."""
    with transaction(factory, durable=False) as db:
        return release_in(db, session_id, kind, owner)


def release_in(db: Session, session_id: str, kind: str, owner: str) -> bool:
    """:func:`release` inside the caller's transaction."""
    result = db.execute(_RELEASE, {"sid": session_id, "lock_kind": kind, "holder": owner})
    return bool(result.rowcount)  # type: ignore[attr-defined]


class LeaseKeeper:
    """Renews a held lease from a background thread until closed.

    ``lost`` becomes true when a renewal finds the lease taken over (the holder stalled
    past expiry); work done after that must rely on its own idempotency.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        session_id: str,
        kind: str,
        owner: str,
        seconds: float,
    ) -> None:
        self._args = (factory, session_id, kind, owner, seconds)
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{kind}-{session_id[:8]}", daemon=True
        )

    @property
    def lost(self) -> bool:
        """Whether the lease was found taken over."""
        return self._lost.is_set()

    def _run(self) -> None:
        # Four renewals per lease: three in a row may fail (a database blip) before it lapses.
        interval = max(self._args[4] / RENEWALS_PER_LEASE, 0.05)
        renewed = time.monotonic()
        while not self._stop.wait(interval):
            try:
                if not renew(*self._args):
                    self._lost.set()
                    log.warning(
                        "lease lost: taken over after it lapsed",
                        extra={
                            "session_id": self._args[1],
                            "kind": self._args[2],
                            "lease_seconds": self._args[4],
                            "since_renewal_seconds": round(time.monotonic() - renewed, 3),
                        },
                    )
                    return
                renewed = time.monotonic()
            except Exception:
                log.exception("lease renewal failed", extra={"session_id": self._args[1]})

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def held(
    factory: sessionmaker[Session], session_id: str, kind: str, owner: str, seconds: float
) -> Iterator[LeaseKeeper | None]:
    """Hold the lease for the block, renewing it; yields ``None`` when it is busy.

    The lease is released on exit, whatever happens inside.
    """
    if not acquire(factory, session_id, kind, owner, seconds):
        yield None
        return
    try:
        with LeaseKeeper(factory, session_id, kind, owner, seconds) as keeper:
            yield keeper
    finally:
        release(factory, session_id, kind, owner)
