"""Random tool-heavy conversations through the whole turn loop on a small window.

Each turn: some chatter nobody addresses to the bot, a question, up to three tool rounds
of up to three calls each (built-in tools run for real on the database), then an answer.
The window is small, so hygiene, preflight and post-response compactions run between and
inside the turns. Every request the model receives must be a transcript a strict provider
accepts (each call followed by exactly its results, no orphan result), and must hold the
turn's question and the latest reply the users saw.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from agent_core.db.models import Message
from tests.fixtures.llm_server import tool_call
from tests.integration.agent_core.test_agent import Harness
from tests.integration.agent_core.test_agent_tools import calls
from tests.unit.agent_core.context.builders import pairing_problems

pytestmark = pytest.mark.integration

WORDS = ["deploy", "cache", "v2.4.1", "/etc/app.conf", "#812", "retry", "lease", "quota"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _call(rng: random.Random, turn: int, n: int) -> dict[str, Any]:
    name = rng.choice(["current_time", "session_search", "recall", "memory"])
    options: dict[str, dict[str, Any]] = {
        "current_time": {"timezone": rng.choice(["UTC", "Europe/Berlin", "Nowhere/Else"])},
        "session_search": {"query": _text(rng, rng.randint(1, 3)), "limit": rng.randint(1, 8)},
        "recall": {"message_id": rng.randint(1, 400), "before": 3, "after": 3},
        "memory": {"action": "add", "content": _text(rng, rng.randint(3, 60))},
    }
    return tool_call(name, options[name], f"t{turn}_{n}")


@pytest.mark.parametrize("seed", range(3))
def test_random_tool_heavy_turns_send_valid_transcripts(factory, seed):
    rng = random.Random(seed)
    h = Harness(factory, tools=True, context_length=16_000, compression_hard_message_limit=60)
    latest_answer: str | None = None
    for turn in range(10):
        h.chatter(rng.randint(2, 12), words=rng.randint(40, 200))
        question = f"question {turn}: {_text(rng, rng.randint(2, 30))}"
        rounds = [
            calls(*(_call(rng, turn, r * 3 + c) for c in range(rng.randint(1, 3))))
            for r in range(rng.randint(0, 3))
        ]
        answer = f"answer {turn}"
        h.main.queue(*rounds, answer)
        before = len(h.main.calls)
        outcome, _, _ = h.turn(h.say(question))
        assert outcome.text == answer
        for request in h.main.calls[before:]:
            sent = request.messages
            assert pairing_problems(sent) == [], f"turn {turn}"
            contents = [str(m.get("content") or "") for m in sent]
            assert any(question in c for c in contents), "the turn's question was sent"
            if latest_answer is not None:
                assert any(c == latest_answer for c in contents), "the latest reply was sent"
        latest_answer = answer
    assert h.session().compaction_count >= 2, "the window is small enough to compact"
    with h.factory() as db:
        archived_results = (
            db.query(Message).filter(Message.role == "tool", Message.archived.is_(True)).count()
        )
    assert archived_results > 0, "compactions took tool rounds into their summaries"
