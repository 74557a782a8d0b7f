"""The fake provider scripts tool calls in the OpenAI format, read by litellm as a provider's."""

from __future__ import annotations

import pytest

from agent_core.config import LLMSettings
from agent_core.llm.litellm_model import LiteLLMModel
from tests.fixtures.llm_server import FakeLLM, ScriptedReply, tool_call

pytestmark = pytest.mark.integration


def test_queued_tool_calls_then_text_then_echo_again(fake_llm: FakeLLM) -> None:
    model = LiteLLMModel(
        LLMSettings(model="openai/fake-model", api_base=fake_llm.base_url, api_key="sk-test")
    )
    fake_llm.queue_replies(
        ScriptedReply(
            content="Let me check.",
            tool_calls=[
                tool_call("current_time", {"timezone": "Asia/Tokyo"}, "call_a"),
                tool_call("session_search", '{"query": "ERR-4411"}', "call_b"),
            ],
        ),
        ScriptedReply("It is noon in Tokyo."),
    )
    tools = [{"type": "function", "function": {"name": "current_time", "parameters": {}}}]
    first = model.complete([{"role": "user", "content": "time?"}], tools=tools)
    assert first.finish_reason == "tool_calls"
    assert first.content == "Let me check."
    assert first.tool_calls == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "current_time", "arguments": '{"timezone": "Asia/Tokyo"}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "session_search", "arguments": '{"query": "ERR-4411"}'},
        },
    ]
    assert fake_llm.chat_requests()[0]["tools"] == tools
    second = model.complete([{"role": "user", "content": "time?"}])
    assert (second.content, second.tool_calls) == ("It is noon in Tokyo.", None)
    third = model.complete([{"role": "user", "content": "plain"}])
    assert third.content == "echo: plain", "the existing API keeps working"
