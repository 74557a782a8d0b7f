"""Console sign-ins, kept on the server: in Redis (shared by every gateway) or in memory.

The browser holds only a random session id in its cookie; the store keeps, under the
id's SHA-256, which key signed in, the session's CSRF token and when it expires. The
key's secret is never kept: every request re-reads the key's row by its prefix, so a
revoked key ends its sessions at once. Signing out deletes the stored session.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from typing import Protocol

import redis

SESSION_ID_BYTES = 32
CSRF_TOKEN_BYTES = 32
REDIS_KEY_PREFIX = "hubbub:console:session:"
REDIS_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class ConsoleSession:
    """One signed-in browser."""

    key_prefix: str
    """The visible prefix of the API key that signed in."""
    csrf: str
    """Every form of this session carries it; a write without it is refused."""
    expires_at: float
    """Unix time after which the session is gone."""


class SessionStore(Protocol):
    """Where sessions live; ids are only ever stored hashed."""

    def put(self, session_id: str, session: ConsoleSession, ttl_seconds: int) -> None:
        """Keep ``session`` under ``session_id`` for ``ttl_seconds``."""

    def get(self, session_id: str) -> ConsoleSession | None:
        """The live session with this id, or ``None``."""

    def delete(self, session_id: str) -> None:
        """Forget the session (signing out)."""

    def close(self) -> None:
        """Release connections."""


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def new_session(key_prefix: str, ttl_seconds: int) -> tuple[str, ConsoleSession]:
    """A fresh random session id and its session for the key named ``key_prefix``."""
    session = ConsoleSession(
        key_prefix=key_prefix,
        csrf=secrets.token_urlsafe(CSRF_TOKEN_BYTES),
        expires_at=time.time() + ttl_seconds,
    )
    return secrets.token_urlsafe(SESSION_ID_BYTES), session


class MemorySessionStore:
    """Sessions in this process (embedded mode: one gateway); a restart signs everyone out."""

    def __init__(self) -> None:
        self._sessions: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def put(self, session_id: str, session: ConsoleSession, ttl_seconds: int) -> None:
        """Keep ``session``; expired ones are dropped on the way."""
        now = time.time()
        with self._lock:
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires_at > now}
            self._sessions[_digest(session_id)] = session

    def get(self, session_id: str) -> ConsoleSession | None:
        """The session, unless it expired."""
        with self._lock:
            found = self._sessions.get(_digest(session_id))
        return found if found is not None and found.expires_at > time.time() else None

    def delete(self, session_id: str) -> None:
        """Forget the session."""
        with self._lock:
            self._sessions.pop(_digest(session_id), None)

    def close(self) -> None:
        """Nothing to release."""


class RedisSessionStore:
    """Sessions in Redis with a TTL, so every gateway behind a load balancer knows them."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        )

    def put(self, session_id: str, session: ConsoleSession, ttl_seconds: int) -> None:
        """Store the session; Redis drops it after ``ttl_seconds``."""
        self._client.set(
            REDIS_KEY_PREFIX + _digest(session_id), json.dumps(asdict(session)), ex=ttl_seconds
        )

    def get(self, session_id: str) -> ConsoleSession | None:
        """The session, unless it expired."""
        raw = self._client.get(REDIS_KEY_PREFIX + _digest(session_id))
        if raw is None:
            return None
        found = ConsoleSession(**json.loads(raw))
        return found if found.expires_at > time.time() else None

    def delete(self, session_id: str) -> None:
        """Forget the session."""
        self._client.delete(REDIS_KEY_PREFIX + _digest(session_id))

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def store_for(redis_url: str | None) -> SessionStore:
    """Redis when the deployment has it, else this process's memory."""
    return RedisSessionStore(redis_url) if redis_url else MemorySessionStore()
