"""What a turn reads through the embedded pipeline, on SQLite and Postgres."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.services import (
    GatewayServer,
    hubbub_env,
    post_accepted,
    settings_from_env,
    wait_replies,
)

pytestmark = pytest.mark.integration

A_TURNS_MESSAGE_WITH_ITS_SESSION = (
    r"^SELECT messages\.id, .* FROM messages JOIN sessions ON sessions\.id = messages\.session_id"
    r" .*WHERE messages\.id = "
)


def test_the_agent_starts_on_the_workers_first_read_of_the_turn(
    db_url: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    """Message, session, bot and tenant are read once a turn: the worker's read, which the
    agent starts on when nothing of the session was written since (no images fetched)."""
    gateway = gateway_factory(
        settings_from_env(hubbub_env(db_url=db_url, home=tmp_path, fake=fake_llm))
    )
    engine = gateway.runtime.factory.kw["bind"]
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
            post_accepted(client, "c1", "hello there")
            (reply,) = wait_replies(client, "c1", 1)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert reply["text"]
    assert len([s for s in statements if re.search(A_TURNS_MESSAGE_WITH_ITS_SESSION, s)]) == 1
    rereads = [
        s for s in statements if re.search(r"^SELECT sessions\.id, .* WHERE sessions\.id = ", s)
    ]
    assert rereads == [], "nothing changed the session meanwhile: its row is not read again"
