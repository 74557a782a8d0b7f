"""The path the turn loop will take, end to end: model → tool calls → results → model.

Real litellm over HTTP to the fake provider, real database; the loop itself is written
out here because the integrator wires the registry into ``Agent.run``.
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from agent_core.compaction.service import build_transcript
from agent_core.config import LLMSettings, ToolSettings
from agent_core.db.engine import transaction
from agent_core.db.models import ChatSession, Message
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.sessions.repository import SessionRepository
from agent_core.tools import (
    DatabaseResultStore,
    ToolRegistry,
    append_tool_exchange,
    fit_results,
)
from tests.fixtures.llm_server import FakeLLM, ScriptedReply, tool_call
from tests.integration.tools.helpers import COUNTER, make_chat

pytestmark = pytest.mark.integration

WINDOW = 16_000


def test_tool_calls_results_and_the_final_answer(
    factory: sessionmaker[Session], fake_llm: FakeLLM
) -> None:
    chat = make_chat(factory, "dm-loop")
    chat.say("remember I use vim; and what did the build log say?", "ann")
    trigger_id = chat.say("so?", "ann")
    ctx = chat.ctx(context_length=WINDOW)
    model = LiteLLMModel(
        LLMSettings(
            model="openai/fake-model", api_base=fake_llm.base_url, api_key="sk-test",
            context_length=WINDOW, max_retries=0,
        )
    )  # fmt: skip
    registry = ToolRegistry.for_turn(
        settings=ToolSettings(), allowed=None, mcp=None, chat_type="private",
        context_length=WINDOW, counter=COUNTER,
    )  # fmt: skip
    calls = [
        tool_call("memory", {"action": "add", "content": "Ann uses vim"}, "call_mem"),
        tool_call("current_time", {}, "call_time"),
        tool_call("no_such_tool", "{}", "call_bad"),
    ]
    fake_llm.queue_replies(ScriptedReply(tool_calls=calls), ScriptedReply("Done: noted vim."))

    def transcript() -> list[dict[str, object]]:
        with transaction(factory) as db:
            repo = SessionRepository.from_session(db)
            s = repo.get(ctx.session_id)
            assert s is not None
            return build_transcript(repo.context_rows(s.id), s, COUNTER).messages

    first = model.complete(transcript(), tools=registry.openai_tools())
    assert first.tool_calls is not None
    drafts = registry.execute_all(first.tool_calls, ctx)
    with transaction(factory) as db:
        s = db.get(ChatSession, ctx.session_id)
        trigger = db.get(Message, trigger_id)
        assert s is not None
        assert trigger is not None
        store = DatabaseResultStore(db, tenant_id=ctx.tenant_id, session_id=ctx.session_id)
        fitted = fit_results(drafts, context_length=WINDOW, store=store)
        append_tool_exchange(
            db, s, trigger, content=first.content, tool_calls=first.tool_calls,
            results=fitted, counter=COUNTER,
        )  # fmt: skip
    second = model.complete(transcript(), tools=registry.openai_tools())
    assert second.content == "Done: noted vim."

    sent = fake_llm.chat_requests()[1]["messages"]
    assert sent[-4]["tool_calls"][0]["id"] == "call_mem"
    assert [m["role"] for m in sent[-3:]] == ["tool", "tool", "tool"]
    assert sent[-3]["tool_call_id"] == "call_mem"
    assert sent[-3]["content"].startswith("Remembered.")
    assert sent[-1]["content"].startswith("Unknown tool 'no_such_tool'")
    assert {t["function"]["name"] for t in fake_llm.chat_requests()[1]["tools"]} >= {
        "memory",
        "session_search",
        "read_tool_result",
    }
