"""The ``memory`` tool and its scopes: a person's facts never reach a group or anyone else."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_core.commands import CommandContext, run_command
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, MemoryEntry, Message
from agent_core.memory.repository import MemoryRepository
from agent_core.prompt.assembler import PromptAssembler
from agent_core.prompt.builder import PromptInputs
from agent_core.prompt.service import restore_or_build
from agent_core.sessions.repository import SessionRepository
from agent_core.tools.base import ToolContext
from tests.integration.tools.helpers import Chat, call, make_chat, tools

pytestmark = pytest.mark.integration


def remember(ctx: ToolContext, content: str, scope: str = "user", **extra: str) -> str:
    out = tools().execute(call("memory", action="add", content=content, scope=scope, **extra), ctx)
    assert not out.is_error, out.content
    return out.content


def snapshot(factory: sessionmaker[Session], chat: Chat) -> list[str]:
    with transaction(factory) as db:
        chat_session = db.get(ChatSession, chat.session().id)
        assert chat_session is not None
        return PromptAssembler.__new__(PromptAssembler).memory(db, chat_session)


def command(
    factory: sessionmaker[Session], chat: Chat, name: str, user: str, args: str = ""
) -> str:
    message_id = chat.say(f"/{name} {args}".strip(), user)
    with transaction(factory) as db:
        chat_session = SessionRepository.from_session(db).get(chat.session().id)
        message = db.get(Message, message_id)
        assert chat_session is not None
        assert message is not None
        return run_command(name, CommandContext(db, chat_session, message, args, None))


def test_user_facts_reach_only_that_persons_private_chat(factory: sessionmaker[Session]) -> None:
    ann_dm = make_chat(factory, "dm-ann")
    bob_dm = make_chat(factory, "dm-bob")
    group = make_chat(factory, "team", group=True)
    ann_dm.say("hi", "ann")
    bob_dm.say("hi", "bob")
    group.say("hello all", "ann")

    remember(ann_dm.ctx("ann"), "Ann is allergic to peanuts")
    remember(group.ctx("ann"), "Ann prefers tea")  # a user fact written from a group
    remember(group.ctx("bob"), "The team ships on Fridays", scope="chat")
    remember(ann_dm.ctx("ann"), "This chat is about the move", scope="chat")

    assert snapshot(factory, ann_dm) == [
        "Ann is allergic to peanuts",
        "Ann prefers tea",
        "This chat is about the move",
    ]
    assert snapshot(factory, bob_dm) == []
    assert snapshot(factory, group) == ["The team ships on Fridays"], "never anyone's user facts"


def test_writes_are_durable_but_the_running_prompt_stays_frozen(
    factory: sessionmaker[Session],
) -> None:
    chat = make_chat(factory, "dm-frozen")
    chat.say("hi", "ann")
    assembler = PromptAssembler.__new__(PromptAssembler)

    def prompt() -> str:
        with transaction(factory) as db:
            s = db.get(ChatSession, chat.session().id)
            assert s is not None
            inputs = PromptInputs(
                persona="p", model="m", platform="webchat", chat_type="private",
                session_id=s.id, context_length=128_000,
            )  # fmt: skip
            return restore_or_build(
                db, s, inputs, date(2026, 12, 1), load_memory=lambda: assembler.memory(db, s)
            )

    before = prompt()
    remember(chat.ctx("ann"), "Ann lives in Oslo")
    assert prompt() == before, "the frozen snapshot is restored byte for byte"
    with transaction(factory) as db:
        assert db.scalar(select(MemoryEntry.content)) == "Ann lives in Oslo"
    chat.new_session()
    chat.say("hello again", "ann")
    assert "Ann lives in Oslo" in prompt(), "a new session picks it up"


def test_replace_remove_and_limits(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "dm-limits")
    chat.say("hi", "ann")
    ctx = chat.ctx("ann")
    reg = tools()
    remember(ctx, "Works at Acme as a plumber")
    assert remember(ctx, "works at acme as a PLUMBER") == "Already remembered."

    out = reg.execute(
        call("memory", action="replace", old_text="acme", content="Works at Initech"), ctx
    )
    assert not out.is_error
    too_long = reg.execute(call("memory", action="add", content="x" * 61), ctx)
    assert too_long.is_error
    assert "at most 60 characters" in too_long.content
    remember(ctx, "Likes jazz")
    remember(ctx, "Likes chess")
    full = reg.execute(call("memory", action="add", content="Likes golf"), ctx)
    assert full.is_error
    assert "full (3 entries)" in full.content
    ambiguous = reg.execute(call("memory", action="remove", content="", old_text="Likes"), ctx)
    assert ambiguous.is_error
    assert "2 user memory entries contain" in ambiguous.content
    missing = reg.execute(call("memory", action="remove", content="", old_text="golf"), ctx)
    assert missing.is_error
    removed = reg.execute(call("memory", action="remove", content="", old_text="chess"), ctx)
    assert not removed.is_error
    with transaction(factory) as db:
        rows = MemoryRepository(db).entries(ctx.tenant_id, ctx.bot_id, user_id="ann")
        assert [r.content for r in rows] == ["Works at Initech", "Likes jazz"]


def test_hostile_text_is_stored_safely(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "dm-hostile")
    chat.say("hi", "ann")
    remember(chat.ctx("ann"), "nul\x00 and \ud800 surrogate </memory-context>")
    assert snapshot(factory, chat) == ["nul\ufffd and \ufffd surrogate </memory-context>"]


def test_no_user_fact_without_a_person(factory: sessionmaker[Session]) -> None:
    chat = make_chat(factory, "anon")
    chat.say("hi", "ann")
    out = tools().execute(call("memory", action="add", content="x"), chat.ctx(None))
    assert out.is_error
    assert "scope 'chat'" in out.content


def test_memory_and_forget_commands(factory: sessionmaker[Session]) -> None:
    dm = make_chat(factory, "dm-cmd")
    group = make_chat(factory, "grp-cmd", group=True)
    dm.say("hi", "ann")
    group.say("hi", "ann")
    remember(dm.ctx("ann"), "Ann has a cat")
    remember(dm.ctx("ann"), "Ann has a dog")
    remember(group.ctx("ann"), "Ann's secret hobby")  # user fact: never shown in the group
    remember(group.ctx("ann"), "Standup at nine", scope="chat")
    remember(group.ctx("bob"), "Retro on Fridays", scope="chat")

    listed = command(factory, dm, "memory", "ann")
    assert "Ann has a cat (about you)" in listed
    assert "Ann's secret hobby (about you)" in listed
    in_group = command(factory, group, "memory", "ann")
    assert "Standup at nine" in in_group
    assert "Retro on Fridays" in in_group
    assert "secret hobby" not in in_group

    assert command(factory, dm, "forget", "ann", "dog").startswith("Forgot 1 memory about you")
    assert "Nothing to forget matching 'zebra'" in command(factory, dm, "forget", "ann", "zebra")
    assert command(factory, group, "forget", "ann").startswith("Forgot 1 memory for this group")
    assert "Retro on Fridays" in command(factory, group, "memory", "ann"), "bob's stays"
    assert command(factory, dm, "forget", "ann").startswith("Forgot 2 memories")
    assert command(factory, dm, "memory", "ann") == "I remember nothing about you in this chat."
