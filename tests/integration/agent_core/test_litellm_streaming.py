"""The model seam streams through litellm's real HTTP path: text as it grows, same result."""

from __future__ import annotations

import pytest

from agent_core.config import LLMSettings
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.llm.model import CallStopped
from tests.fixtures.llm_server import Failure, FakeLLM, LLMServerThread, ScriptedReply, tool_call
from tests.fixtures.services import wait_until

pytestmark = pytest.mark.integration


def _model(fake_llm: FakeLLM) -> LiteLLMModel:
    return LiteLLMModel(
        LLMSettings(model="openai/fake-model", api_base=fake_llm.base_url, api_key="sk-test")
    )


def _with_fallback(fake_llm: FakeLLM, second: FakeLLM) -> LiteLLMModel:
    """The fake model, falling back to ``second``'s ``openai/fake-b``."""
    return LiteLLMModel(
        LLMSettings(
            model="openai/fake-model",
            api_base=fake_llm.base_url,
            api_key="sk-test",
            fallbacks=("openai/fake-b",),
            endpoints=(("openai/fake-b", second.base_url),),
        )
    )


def test_streamed_text_grows_and_the_result_matches_a_plain_call(fake_llm: FakeLLM) -> None:
    fake_llm.queue_replies(ScriptedReply("one two three four"), ScriptedReply("one two three four"))
    seen: list[str] = []
    messages = [{"role": "user", "content": "count"}]

    streamed = _model(fake_llm).complete(messages, on_text=seen.append)
    plain = _model(fake_llm).complete(messages)

    assert seen == ["one ", "one two ", "one two three ", "one two three four"]
    assert fake_llm.chat_requests()[0]["stream"] is True
    assert fake_llm.chat_requests()[0]["stream_options"] == {"include_usage": True}
    assert streamed.content == plain.content == "one two three four"
    assert streamed.usage == plain.usage
    assert streamed.usage is not None
    assert streamed.usage.prompt_tokens > 0
    assert streamed.finish_reason == "stop"


def test_a_streamed_tool_call_is_rebuilt_and_its_text_stops_showing(fake_llm: FakeLLM) -> None:
    fake_llm.queue_replies(
        ScriptedReply(
            content="Let me check.",
            tool_calls=[tool_call("current_time", {"timezone": "Asia/Tokyo"}, "call_a")],
        )
    )
    seen: list[str] = []
    tools = [{"type": "function", "function": {"name": "current_time", "parameters": {}}}]

    result = _model(fake_llm).complete(
        [{"role": "user", "content": "time?"}], tools=tools, on_text=seen.append
    )

    assert seen == ["Let ", "Let me ", "Let me check."]
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "current_time", "arguments": '{"timezone": "Asia/Tokyo"}'},
        }
    ]
    assert result.usage is not None
    assert result.usage.completion_tokens > 0


def test_a_stream_refused_with_a_429_is_streamed_by_the_fallback(fake_llm: FakeLLM) -> None:
    fake_llm.fail_next(Failure.rate_limited(60))
    with LLMServerThread() as second:
        second.queue_replies(ScriptedReply("from the fallback"))
        model = _with_fallback(fake_llm, second)
        seen: list[str] = []
        result = model.complete([{"role": "user", "content": "hi"}], on_text=seen.append)
        (request,) = second.chat_requests()

    assert seen == ["from ", "from the ", "from the fallback"]
    assert result.content == "from the fallback"
    assert result.model == "openai/fake-b"
    assert result.attempts == 2
    assert request["stream"] is True
    assert len(fake_llm.chat_requests()) == 1


def test_a_sink_that_says_stop_closes_the_stream_and_no_fallback_is_tried(
    fake_llm: FakeLLM,
) -> None:
    """``/stop`` mid-stream: the call ends there, the provider sees the stream closed."""
    fake_llm.stream_tokens_per_second = 50
    fake_llm.queue_replies(ScriptedReply(" ".join(f"word{n}" for n in range(200))))
    seen: list[str] = []

    def sink(text: str) -> None:
        seen.append(text)
        if len(seen) == 3:
            raise CallStopped

    with LLMServerThread() as second:
        model = _with_fallback(fake_llm, second)
        with pytest.raises(CallStopped):
            model.complete([{"role": "user", "content": "talk"}], on_text=sink)
        assert second.chat_requests() == [], "a stop is not a failure to fall back from"

    assert len(seen) == 3
    wait_until(lambda: fake_llm.streams_cut == 1, timeout=30, what="the stream closed")
    fake_llm.queue_replies(ScriptedReply("still here"))
    assert _model(fake_llm).complete([{"role": "user", "content": "hi"}]).content == "still here"
