"""A delivered reply stays delivered through a Postgres crash (on a private Postgres).

The crash is ``pg_ctl stop -m immediate``: what was committed but not yet written to the
WAL on disk is gone after the restart. The private server keeps asynchronous commits in
memory for up to ten seconds (``wal_writer_delay``), so a commit that did not wait for
the disk is reliably the one lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from agent_core.db.migrations import upgrade_to_head
from agent_core.db.models import OutboxState
from tests.fixtures.outbox import TELEGRAM_CHAT, Platforms, World
from tests.fixtures.platform_servers.faults import AfterPost
from tests.fixtures.restartable import PrivatePostgres
from tests.fixtures.services import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("_restore_discord_globals")]


@pytest.fixture
def crashable(
    private_postgres: PrivatePostgres, tmp_path: Path, platforms: Platforms
) -> Iterator[World]:
    """A world on a Postgres of the test's own that keeps unflushed commits for 10 s."""
    upgrade_to_head(private_postgres.url)
    admin = create_engine(private_postgres.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("ALTER SYSTEM SET wal_writer_delay = '10s'"))
        conn.execute(text("SELECT pg_reload_conf()"))
    admin.dispose()
    world = World(private_postgres.url, tmp_path, platforms)
    yield world
    world.close()


def test_the_sent_mark_survives_a_crash_right_after_the_delivery(
    crashable: World, private_postgres: PrivatePostgres, platforms: Platforms
) -> None:
    outbox_id = crashable.queue_reply("telegram", TELEGRAM_CHAT)
    assert crashable.service.deliver(outbox_id) is True
    private_postgres.stop("immediate")
    private_postgres.start()
    crashable.engine.dispose()  # the pool's connections died with the server
    entry = crashable.entry(outbox_id)
    assert entry.state == OutboxState.SENT
    (sent,) = platforms.telegram.sent_messages()
    assert entry.platform_message_ids == [f"{TELEGRAM_CHAT}:{sent['_message_id']}"]


@pytest.mark.usefixtures("short_timeouts")
def test_an_unknown_mark_survives_a_crash_too(
    crashable: World, private_postgres: PrivatePostgres, platforms: Platforms
) -> None:
    outbox_id = crashable.queue_reply("telegram", TELEGRAM_CHAT)
    platforms.telegram.after_next("sendMessage", AfterPost.answer_late())
    assert crashable.service.deliver(outbox_id) is False
    private_postgres.stop("immediate")
    private_postgres.start()
    crashable.engine.dispose()
    assert crashable.entry(outbox_id).state == OutboxState.UNKNOWN


def test_a_send_taken_while_the_database_is_down_is_recorded_once_it_is_back(
    crashable: World,
    private_postgres: PrivatePostgres,
    platforms: Platforms,
    caplog: pytest.LogCaptureFixture,
) -> None:
    outbox_id = crashable.queue_reply("telegram", TELEGRAM_CHAT)
    answer = threading.Event()
    platforms.telegram.after_next("sendMessage", AfterPost.answer_when(answer))
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(crashable.service.deliver(outbox_id)))
    worker.start()
    wait_until(lambda: platforms.telegram.sent_messages(), timeout=60, what="the send")

    private_postgres.stop("immediate")
    answer.set()  # Telegram accepts the reply while the database is away
    # Until the worker has its answer: it gave up (finished) or waits for the database.
    wait_until(
        lambda: (
            not worker.is_alive() or any("outcome again" in r.getMessage() for r in caplog.records)
        ),
        timeout=30,
        what="the worker to get Telegram's answer",
    )
    private_postgres.start()
    worker.join(60)

    assert result == [True]
    assert crashable.entry(outbox_id).state == OutboxState.SENT
    assert len(platforms.telegram.sent_messages()) == 1
