"""``hubbub backup`` / ``hubbub restore`` against a running embedded ``hubbub up``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    REPO_ROOT,
    ServiceProcess,
    conversation,
    free_port,
    hubbub_env,
    start_up,
    wait_until,
)

pytestmark = pytest.mark.e2e


def _embedded_env(home: Path, fake: FakeLLM) -> dict[str, str]:
    env = hubbub_env(db_url="", home=home, fake=fake)
    del env["HUBBUB_DATABASE_URL"]  # the default: a SQLite file under HUBBUB_HOME
    return env


def _hubbub(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HUBBUB_")} | env
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=REPO_ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _count(path: Path, sql: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def _user_messages(path: Path) -> int:
    return _count(path, "SELECT count(*) FROM messages WHERE role = 'user'")


def test_backup_while_writing_then_restore_after_stopping(
    tmp_path: Path, fake_llm: FakeLLM, processes: list[ServiceProcess]
) -> None:
    home = tmp_path / "home"
    env = _embedded_env(home, fake_llm)
    port = free_port()
    service = start_up(env, port)
    processes.append(service)
    stop = threading.Event()
    posted: list[int] = []

    def write() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            while not stop.is_set():
                n = len(posted)
                response = client.post(f"/api/webchat/c{n % 3}/messages", json={"text": f"m{n}"})
                assert response.status_code == 202
                posted.append(n)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_until(lambda: len(posted) >= 20, timeout=60, what="messages being written")
    backups = [tmp_path / f"backup-{i}.db" for i in range(3)]
    for path in backups:  # while the writer keeps going
        done = _hubbub(env, "backup", str(path))
        assert done.returncode == 0, done.stderr
        assert f"to {path}" in done.stdout
    stop.set()
    writer.join(30)
    assert len(posted) > 20

    for path in backups:
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    counts = [_user_messages(path) for path in backups]
    assert counts == sorted(counts)
    assert counts[0] > 0
    assert counts[-1] <= len(posted)

    # The existing file is kept unless asked; the running gateway's database is not restored.
    refused = _hubbub(env, "backup", str(backups[0]))
    assert refused.returncode == 2
    assert "exists" in refused.stderr
    database = home / "hubbub.db"
    before = _user_messages(database)
    busy = _hubbub(env, "restore", str(backups[0]))
    assert busy.returncode == 1
    assert "stop it" in busy.stderr
    assert _user_messages(database) == before

    service.signal(signal.SIGTERM)
    assert service.wait(60) == 0
    restored = _hubbub(env, "restore", str(backups[0]))
    assert restored.returncode == 0, restored.stderr
    assert _user_messages(database) == counts[0]

    port = free_port()
    processes.append(start_up(env, port))
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        shown = sum(
            1 for c in ("c0", "c1", "c2") for m in conversation(client, c) if m["role"] == "user"
        )
    assert shown == counts[0]


def test_restore_refuses_what_is_not_a_hubbub_backup(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = _embedded_env(tmp_path / "home", fake_llm)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    foreign = tmp_path / "foreign.db"
    with closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE t (x)")
    future = tmp_path / "future.db"
    made = _hubbub(env, "migrate")
    assert made.returncode == 0, made.stderr
    assert _hubbub(env, "backup", str(future)).returncode == 0
    with closing(sqlite3.connect(future)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
        conn.commit()
    database = tmp_path / "home" / "hubbub.db"
    size = database.stat().st_size
    for path, reason in [
        (tmp_path / "missing.db", "does not exist"),
        (garbage, "not a SQLite database"),
        (foreign, "not a Hubbub database"),
        (future, "does not know"),
    ]:
        result = _hubbub(env, "restore", str(path))
        assert result.returncode == 2, (path, result.stdout)
        assert reason in result.stderr, result.stderr
    assert database.stat().st_size == size
    postgres = _hubbub(
        env | {"HUBBUB_DATABASE_URL": "postgresql://x@127.0.0.1/x"}, "backup", "b.db"
    )
    assert postgres.returncode == 2
    assert "pg_dump" in postgres.stderr
