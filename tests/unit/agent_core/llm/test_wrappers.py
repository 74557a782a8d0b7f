"""The wrappers around the chat model seam: the summary model's fallback, blank answers."""

from __future__ import annotations

import threading

import pytest

from agent_core.errors import ProviderAuthError, ProviderBadRequest
from agent_core.llm.fallback import FallbackModel
from agent_core.llm.model import ChatResult
from agent_core.llm.wrapper import EmptyReplyError, Meter, MeteredModel, TextRequired
from tests.unit.agent_core.context.scripted import ScriptedModel

ASK = [{"role": "user", "content": "p"}]


class TestFallbackModel:
    def test_switches_to_the_fallback_once_and_for_good(self):
        aux = ScriptedModel("aux", replies=[ProviderAuthError("aux", "bad key")])
        main = ScriptedModel("main", replies=["from main", "again main"])
        model = FallbackModel(aux, main)
        assert model.name == "aux"
        assert model.complete(ASK).content == "from main"
        assert model.fell_back
        assert model.name == "main"
        assert model.complete(ASK).content == "again main"
        assert (len(aux.calls), len(main.calls)) == (1, 2)

    def test_the_fallbacks_error_is_raised(self):
        aux = ScriptedModel("aux", replies=[ProviderAuthError("aux", "bad key")])
        main = ScriptedModel("main", replies=[ProviderBadRequest("main", "no")])
        with pytest.raises(ProviderBadRequest):
            FallbackModel(aux, main).complete(ASK)

    def test_a_request_sized_for_it_fits_both(self):
        aux = ScriptedModel("aux", context_length=8_192)
        main = ScriptedModel("main", context_length=128_000, max_output_tokens=500)
        model = FallbackModel(aux, main)
        assert model.context_length == 8_192
        assert model.max_output_tokens is None

    def test_concurrent_failures_all_end_on_the_fallback(self):
        aux = ScriptedModel("aux", default=ProviderAuthError("aux", "bad key"))
        main = ScriptedModel("main", default="ok")
        model = FallbackModel(aux, main)
        answers: list[str | None] = []
        threads = [
            threading.Thread(target=lambda: answers.append(model.complete(ASK).content))
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == ["ok"] * 8
        assert len(main.calls) == 8


class TestTextRequired:
    @pytest.mark.parametrize("content", ["", "   \n", None])
    def test_a_blank_answer_is_a_failure(self, content):
        model = ScriptedModel("main", replies=[ChatResult(content=content)])
        with pytest.raises(EmptyReplyError):
            TextRequired(model).complete(ASK)

    def test_tool_calls_are_an_answer(self):
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        model = ScriptedModel("main", replies=[ChatResult(content=None, tool_calls=calls)])
        assert TextRequired(model).complete(ASK).tool_calls == calls

    def test_a_blank_summary_falls_back_to_the_main_model(self):
        aux = TextRequired(ScriptedModel("aux", replies=["  "]))
        main = TextRequired(ScriptedModel("main", replies=["summary"]))
        model = FallbackModel(aux, main)
        assert model.complete(ASK).content == "summary"
        assert model.fell_back


class TestMeter:
    def test_cpu_is_counted_on_the_thread_that_spent_it(self):
        meter = Meter()
        model = MeteredModel(ScriptedModel("main"), meter)
        model.complete(ASK)
        own = meter.cpu_seconds
        worker = threading.Thread(target=lambda: [model.complete(ASK) for _ in range(50)])
        worker.start()
        worker.join()
        assert meter.calls == 51
        assert meter.cpu_seconds == own
