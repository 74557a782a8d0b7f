"""Stored tool results and the transcript rows of a tool exchange, on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.service import build_transcript
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message
from agent_core.sessions.repository import SessionRepository
from agent_core.tools.output import ToolResultDraft, fit_results
from agent_core.tools.results import DatabaseResultStore
from agent_core.tools.transcript import append_tool_exchange
from tests.integration.tools.helpers import COUNTER, Chat, call, make_chat, tools

pytestmark = pytest.mark.integration

WINDOW = 32_000  # per-result threshold 19,200 characters


def spill(factory: sessionmaker[Session], chat: Chat, content: str) -> str:
    s = chat.session()
    with transaction(factory) as db:
        store = DatabaseResultStore(db, tenant_id=s.tenant_id, session_id=s.id)
        (fitted,) = fit_results(
            [ToolResultDraft("call_big", "gh__log", content)], context_length=WINDOW, store=store
        )
    assert fitted.stored_ref is not None
    return fitted.stored_ref


def read(chat: Chat, ref: str, **kwargs: int) -> tuple[bool, str]:
    out = tools(WINDOW).execute(
        call("read_tool_result", ref=ref, **kwargs), chat.ctx(context_length=WINDOW)
    )
    return out.is_error, out.content


def test_a_stored_result_is_paged_through_in_its_session_only(
    factory: sessionmaker[Session],
) -> None:
    chat = make_chat(factory, "dm-results")
    chat.say("show me the log", "ann")
    content = "".join(f"line {i:05d}\n" for i in range(3_000))  # 33,000 characters
    ref = spill(factory, chat, content)

    failed, first = read(chat, ref)
    assert not failed
    assert first.startswith(content[:8_000])
    assert "offset=8000)" in first
    pages, offset = [], 0
    while True:
        failed, page = read(chat, ref, offset=offset, limit=10_000)
        assert not failed
        body, footer = page.rsplit("\n", 1)
        pages.append(body)
        if "end of the result" in footer:
            break
        offset = int(footer.rsplit("offset=", 1)[1].rstrip(")]"))
    assert "".join(pages) == content

    other = make_chat(factory, "dm-other")
    other.say("hi", "bob")
    failed, leaked = read(other, ref)
    assert failed
    assert "No stored tool result" in leaked
    rival = make_chat(factory, "dm-results", tenant="rival")
    rival.say("hi", "mal")
    assert read(rival, ref)[0]
    assert read(chat, "tr_guessed")[0]


def test_read_pages_are_never_stored_again(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "dm-pages")
    chat.say("log?", "ann")
    ref = spill(factory, chat, "z" * 60_000)
    reg = tools(WINDOW)
    drafts = reg.execute_all(
        [call("read_tool_result", ref=ref, limit=30_000)], chat.ctx(context_length=WINDOW)
    )
    assert not drafts[0].storable
    assert len(drafts[0].content) > 19_000, "a page up to the threshold, not a preview"
    s = chat.session()
    with transaction(factory) as db:
        store = DatabaseResultStore(db, tenant_id=s.tenant_id, session_id=s.id)
        (fitted,) = fit_results(drafts, context_length=WINDOW, store=store)
    assert fitted.stored_ref is None


def test_a_tool_exchange_is_stored_with_exact_tokens_and_reads_back(
    factory: sessionmaker[Session],
) -> None:
    chat = make_chat(factory, "dm-exchange")
    trigger_id = chat.say("what time is it in Tokyo and what is in the log?", "ann")
    calls = [
        call("current_time", timezone="Asia/Tokyo"),
        call("read_tool_result", ref="tr_missing"),
    ]
    ctx = chat.ctx()
    drafts = tools().execute_all(calls, ctx)
    assert not drafts[0].is_error
    assert "in Asia/Tokyo, UTC+09:00" in drafts[0].content
    assert drafts[1].is_error
    s = chat.session()
    with transaction(factory) as db:
        chat_session = db.get(ChatSession, s.id)
        trigger = db.get(Message, trigger_id)
        assert chat_session is not None
        assert trigger is not None
        before = SessionRepository.from_session(db).counters(s.id)
        store = DatabaseResultStore(db, tenant_id=s.tenant_id, session_id=s.id)
        fitted = fit_results(drafts, context_length=128_000, store=store)
        stored = append_tool_exchange(
            db, chat_session, trigger, content=None, tool_calls=calls, results=fitted,
            counter=COUNTER,
        )  # fmt: skip
    assert len(stored.ids) == 3
    with transaction(factory) as db:
        rows = db.execute(
            select(Message.id, Message.seq).where(Message.id.in_(stored.ids)).order_by(Message.seq)
        ).all()
    # One number each, in the order given, the last one the session's newest.
    assert [row.id for row in rows] == stored.ids
    assert [row.seq for row in rows] == [stored.allocation.seq - 2, stored.allocation.seq - 1,
                                         stored.allocation.seq]  # fmt: skip
    with transaction(factory) as db:
        repo = SessionRepository.from_session(db)
        chat_session = repo.get(s.id)
        assert chat_session is not None
        transcript = build_transcript(repo.context_rows(s.id), chat_session, COUNTER)
        after = repo.counters(s.id)
    assistant, first, second = transcript.messages[-3:]
    assert assistant == {"role": "assistant", "content": None, "tool_calls": calls}
    assert first["role"] == "tool"
    assert first["tool_call_id"] == calls[0]["id"]
    assert first["name"] == "current_time"
    assert second["content"].startswith("No stored tool result")
    assert transcript.token_counts[-3:] == [
        COUNTER.count_message(m) for m in (assistant, first, second)
    ]
    assert after == (before[0] + sum(transcript.token_counts[-3:]), before[1] + 3)


def test_unknown_time_zone_is_a_tool_error(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "dm-tz")
    chat.say("hi", "ann")
    out = tools().execute(call("current_time", timezone="Mars/Olympus"), chat.ctx())
    assert out.is_error
    assert "Unknown time zone 'Mars/Olympus'" in out.content
    default = tools().execute(call("current_time"), chat.ctx())
    assert "in UTC, UTC+00:00" in default.content
