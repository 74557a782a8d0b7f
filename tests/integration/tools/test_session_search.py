"""``session_search`` and ``recall``: this chat's past only, identifiers found verbatim."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select, text, true
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.repository import CompactionRepository
from agent_core.db.engine import create_db_engine, transaction
from agent_core.db.models import Message
from agent_core.sessions.archive_search import SAID, ArchiveSearch
from tests.integration.tools.helpers import Chat, call, make_chat, tools

pytestmark = pytest.mark.integration


def search(chat: Chat, query: str, limit: int = 5) -> list[dict[str, object]]:
    out = tools().execute(call("session_search", query=query, limit=limit), chat.ctx())
    assert not out.is_error, out.content
    body = json.loads(out.content)
    return list(body["results"])


def recall(chat: Chat, message_id: int, **kwargs: int) -> tuple[bool, str]:
    out = tools().execute(call("recall", message_id=message_id, **kwargs), chat.ctx())
    return out.is_error, out.content


@pytest.fixture
def history(factory: sessionmaker[Session]) -> dict[str, object]:
    """A group whose first session ended (/new) and whose second was partly compacted."""
    ops = make_chat(factory, "ops", group=True)
    ops.say("the deploy failed with ERR-4411 on friday", "ann", answer="I will look at it")
    ops.say("core dump at 0x7ffd3a2c in the parser", "bob")
    ops.say("artifact is build/x.tar.gz, 40 MB", "cid")
    ops.new_session()
    ops.say("payment service timeouts again", "ann", answer="Noted")
    ops.archive_all()
    ops.say("what happened to the deploy last week?", "bob")  # active: already in context
    other = make_chat(factory, "sales", group=True)  # same bot, another chat
    secret = other.say("the deploy password is hunter2 ERR-4411", "eve")
    rival = make_chat(factory, "ops", group=True, tenant="rival")  # same chat id, other tenant
    rival.say("rival deploy ERR-4411 build/x.tar.gz", "mal")
    return {"ops": ops, "secret_id": secret}


def test_finds_archived_and_earlier_sessions_with_speakers_and_times(
    history: dict[str, object],
) -> None:
    ops = history["ops"]
    assert isinstance(ops, Chat)
    results = search(ops, "deploy failed")
    assert results[0]["speaker"] == "Ann"
    assert "ERR-4411" in str(results[0]["snippet"])
    assert results[0]["where"] == "an earlier session"
    assert {"message_id", "speaker", "time", "where", "snippet"} <= set(results[0])
    payment = search(ops, "payment timeouts")
    assert payment[0]["where"] == "this session (compacted away)"
    assert all("last week" not in str(r["snippet"]) for r in search(ops, "deploy"))


@pytest.mark.parametrize("identifier", ["0x7ffd3a2c", "build/x.tar.gz", "ERR-4411", "x.tar.gz"])
def test_exact_identifiers_are_found_verbatim(history: dict[str, object], identifier: str) -> None:
    ops = history["ops"]
    assert isinstance(ops, Chat)
    results = search(ops, identifier)
    assert results, identifier
    assert identifier in str(results[0]["snippet"])


@pytest.mark.parametrize("query", ["liveCD", "was liveCD mentioned?"])
def test_a_mixed_case_identifier_is_found_as_written_among_its_case_variants(
    factory: sessionmaker[Session], query: str
) -> None:
    """The #ubuntu logs say livecd 261 times, LiveCD 127 and liveCD 56: one is asked for."""
    chat = make_chat(factory, "help", group=True)
    chat.say("boot the ubuntu liveCD and run gparted from there", "ann")
    for n in range(30):
        chat.say(f"the livecd hangs at boot, try LiveCD {n} LIVECD again", "bob")
    chat.say("now", "ann")
    chat.archive_all()
    chat.say("what did ann boot?", "cid")
    results = search(chat, query)
    assert results
    assert "boot the ubuntu liveCD" in str(results[0]["snippet"])


def test_the_operators_archive_search_matches_case_and_pages_in_the_database(
    factory: sessionmaker[Session],
) -> None:
    """``hubbub sessions show --grep`` and the admin API: exact characters, newest first."""
    chat = make_chat(factory, "help", group=True)
    chat.say("boot the liveCD first", "ann")
    for n in range(5):
        chat.say(f"the LiveCD {n} or the livecd", "bob")
    chat.say("liveCD again, and 100%_done", "cid")
    chat.archive_all()
    session_id = chat.session().id
    with transaction(factory) as db:
        repo = CompactionRepository.from_session(db)
        found = [m.content for m in repo.search_archive(session_id, "liveCD")]
        assert found == ["liveCD again, and 100%_done", "boot the liveCD first"]
        assert [m.content for m in repo.search_archive(session_id, "liveCD", limit=1)] == [
            "liveCD again, and 100%_done"
        ]
        assert len(repo.search_archive(session_id, "%_")) == 1


def test_a_phrase_asked_for_is_found_as_written_before_its_words(
    factory: sessionmaker[Session],
) -> None:
    """The ledger carries code spans such as ``ls /media``: asking for one finds it."""
    chat = make_chat(factory, "help", group=True)
    chat.say("what does `ls /media` show?", "ann")
    for n in range(10):
        chat.say(f"mount it under /media/disk{n} first, then ls it", "bob")
    chat.archive_all()
    chat.say("now", "cid")
    for query in ("ls /media", "`ls /media`"):
        results = search(chat, query)
        assert "`ls /media` show" in str(results[0]["snippet"]), query


def test_never_another_chats_or_tenants_words(history: dict[str, object]) -> None:
    ops = history["ops"]
    assert isinstance(ops, Chat)
    everything = json.dumps(search(ops, "deploy password hunter2 rival ERR-4411", limit=20))
    assert "hunter2" not in everything
    assert "rival" not in everything


def test_hostile_queries_are_just_words(history: dict[str, object]) -> None:
    ops = history["ops"]
    assert isinstance(ops, Chat)
    for query in ['" OR 1=1 --', "NEAR(a b)", "deploy*", "a:b", "%_%", "\\", "nul\x00 \ud800"]:
        out = tools().execute(call("session_search", query=query), ops.ctx())
        assert not out.is_error or "no words" in out.content


def test_recall_returns_neighbours_verbatim_and_only_for_this_chat(
    history: dict[str, object],
) -> None:
    ops = history["ops"]
    assert isinstance(ops, Chat)
    (hit,) = search(ops, "0x7ffd3a2c", limit=1)
    failed, content = recall(ops, int(str(hit["message_id"])), before=2, after=1)
    assert not failed
    messages = json.loads(content)["messages"]
    assert [m["text"] for m in messages] == [
        "the deploy failed with ERR-4411 on friday",
        "I will look at it",
        "core dump at 0x7ffd3a2c in the parser",
        "artifact is build/x.tar.gz, 40 MB",
    ]
    assert "not instructions" in json.loads(content)["note"]
    failed, content = recall(ops, int(str(history["secret_id"])))
    assert failed
    assert "not found in this chat" in content
    assert "hunter2" not in content
    failed, content = recall(ops, 10**9)
    assert failed


def test_fts_stays_in_sync_with_edits_and_deletes(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "sync")
    chat.say("first words about kiwis", "ann")
    chat.new_session()
    chat.say("now", "ann")
    assert search(chat, "kiwis")
    with transaction(factory) as db:
        db.execute(
            text("UPDATE messages SET content = 'about mangos' WHERE content LIKE '%kiwis%'")
        )
    assert not search(chat, "kiwis")
    assert search(chat, "mangos")
    with transaction(factory) as db:
        db.execute(text("DELETE FROM messages WHERE content = 'about mangos'"))
    assert not search(chat, "mangos")


def test_sqlite_search_triggers_exist_at_head(sqlite_url: str) -> None:
    """A later batch migration of ``messages`` must recreate them (see 0008_g_tools)."""
    from sqlalchemy import create_engine

    engine = create_engine(sqlite_url)
    with engine.connect() as conn:
        names = set(
            conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).scalars()
        )
    engine.dispose()
    assert {"messages_fts_ai", "messages_fts_ad", "messages_fts_au"} <= names


def test_postgres_search_uses_its_partial_index_in_a_generic_plan(postgres_url: str) -> None:
    """Postgres uses the expression index only for that exact expression, and the partial
    index only where it can prove the predicate: from literal roles, so the generic plan of
    a prepared statement (psycopg prepares a query run five times) uses it too."""
    engine = create_db_engine(postgres_url)
    try:
        with Session(engine) as db:
            search = ArchiveSearch.from_session(db)
            ranked = search._ranked(select(Message, true()).where(SAID), ["deploy", "ERR-4411"], 10)
            compiled = ranked.compile(engine, compile_kwargs={"render_postcompile": True})
            names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", str(compiled))))
            generic = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", str(compiled))
            cursor = db.connection().connection.cursor()
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            cursor.execute("SET LOCAL enable_seqscan = off")
            values = [compiled.params[name] for name in names]
            types = ", ".join("bigint" if isinstance(v, int) else "text" for v in values)
            cursor.execute(f"PREPARE ranked ({types}) AS {generic}")
            literals = ", ".join(str(v) if isinstance(v, int) else "'" + v + "'" for v in values)
            cursor.execute(f"EXPLAIN EXECUTE ranked({literals})")
            plan = "\n".join(str(row[0]) for row in cursor.fetchall())
    finally:
        engine.dispose()
    assert "ix_messages_content_fts" in plan, plan
