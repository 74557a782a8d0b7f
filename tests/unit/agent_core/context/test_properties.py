"""Property tests: any valid transcript compresses to a valid, no longer one."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from agent_core.config import CompressionSettings
from agent_core.context.compressor import ContextCompressor
from agent_core.context.identifiers import recent_identifiers
from agent_core.context.markers import is_summary_message, summary_message
from agent_core.context.repair import repair_tool_pairs
from agent_core.context.serialization import message_body
from agent_core.context.transcript import is_visible_reply
from agent_core.errors import ProviderBadRequest, ProviderError, ProviderUnavailable
from agent_core.tokens import rough_message_tokens
from tests.unit.agent_core.context.builders import (
    assistant,
    calls,
    image_user,
    pairing_problems,
    result,
    system,
    user,
)
from tests.unit.agent_core.context.scripted import ScriptedModel

WORDS = [
    "deploy",
    "the",
    "v1.2.3",
    "fix",
    "/etc/app.conf",
    "#42",
    "ok",
    "run_tests",
    "why",
    "https://x.io/a",
]


@st.composite
def texts(draw: st.DrawFn, max_words: int = 400) -> str:
    count = draw(st.integers(0, max_words))
    seed = draw(st.integers(0, 1_000))
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(count))


@st.composite
def blocks(draw: st.DrawFn, counter: list[int]) -> list[dict[str, Any]]:
    kind = draw(st.sampled_from(["user", "group_user", "reply", "tools", "image", "silent"]))
    if kind == "user":
        return [user(draw(texts()) or "hi")]
    if kind == "group_user":
        return [user(draw(texts()) or "hi", draw(st.sampled_from(["alice", "bob", "carol"])))]
    if kind == "reply":
        return [assistant(draw(texts()) or "sure")]
    if kind == "image":
        return [image_user(draw(texts(20)))]
    if kind == "silent":
        return [assistant(None)] if draw(st.booleans()) else [assistant("   ")]
    n = draw(st.integers(1, 3))
    ids = []
    for _ in range(n):
        counter[0] += 1
        ids.append(f"call_{counter[0]}")
    text = draw(st.one_of(st.none(), texts(30)))
    message = calls(
        [
            (
                i,
                draw(st.sampled_from(["terminal", "read_file", "search"])),
                {"command": draw(texts(300))},
            )
            for i in ids
        ],
        text,
    )
    return [message, *(result(i, draw(texts(800))) for i in ids)]


@st.composite
def transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    counter = [0]
    messages: list[dict[str, Any]] = [system()] if draw(st.booleans()) else []
    if draw(st.booleans()):
        messages.append(summary_message("## Goal\nearlier work on #7"))
    for _ in range(draw(st.integers(1, 30))):
        messages.extend(draw(blocks(counter)))
    return messages


def _latest(messages: list[dict[str, Any]], predicate: Any) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if predicate(messages[i])), None)


SUMMARY_REPLIES = st.sampled_from(["ok", "bad_request", "unavailable"])


@given(
    messages=transcripts(),
    reply=SUMMARY_REPLIES,
    protect_first_n=st.integers(0, 4),
    protect_last_n=st.integers(1, 30),
    force=st.booleans(),
)
def test_any_valid_transcript_compresses_to_a_valid_one(
    messages, reply, protect_first_n, protect_last_n, force
):
    assert pairing_problems(messages) == []
    options: dict[str, list[ProviderError]] = {
        "ok": [],
        "bad_request": [ProviderBadRequest("m", "x"), ProviderBadRequest("m", "x")],
        "unavailable": [ProviderUnavailable("m", "x"), ProviderUnavailable("m", "x")],
    }
    replies = options[reply]
    main = ScriptedModel("main", context_length=16_000, replies=list(replies))
    aux = ScriptedModel("aux", context_length=16_000, replies=list(replies))
    settings = CompressionSettings(protect_first_n=protect_first_n, protect_last_n=protect_last_n)
    engine = ContextCompressor(settings, model=main, summary_model=aux)
    outcome = engine.compress(messages, force=force)
    event(f"outcome: {outcome.outcome}")
    out = outcome.messages

    assert pairing_problems(out) == []
    assert sum(map(rough_message_tokens, out)) <= sum(map(rough_message_tokens, messages))
    if not outcome.applied:
        assert out == messages
        return
    assert outcome.tokens_after < outcome.tokens_before
    latest_user = _latest(messages, lambda m: m["role"] == "user" and not is_summary_message(m))
    latest_reply = _latest(messages, is_visible_reply)
    for anchor in (latest_user, latest_reply):
        if anchor is not None:
            assert anchor in outcome.sources
    kept = [s for s in outcome.sources if s is not None]
    assert len(kept) == len(set(kept))
    assert set(kept) | set(outcome.archived_indices) == set(range(len(messages)))
    assert not set(kept) & set(outcome.archived_indices)
    for message, source in zip(out, outcome.sources, strict=True):
        if source is None:
            continue
        assert message is messages[source] or message == outcome.rewritten[source]
    assert sum(1 for m in out if is_summary_message(m)) == 1
    identifiers_in = set(recent_identifiers([message_body(m) for m in messages]))
    assert set(outcome.identifiers_carried) <= identifiers_in


@st.composite
def message_soup(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Arbitrary, possibly invalid, sequences of calls and results."""
    ids = ["a", "b", "c", "d"]
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "reply", "call", "result"]))
        if kind == "user":
            out.append(user("u"))
        elif kind == "reply":
            out.append(assistant("r"))
        elif kind == "call":
            chosen = draw(st.lists(st.sampled_from(ids), min_size=0, max_size=3))
            out.append(calls([(i, "t", {}) for i in chosen]))
        else:
            out.append(result(draw(st.sampled_from(ids))))
    return out


@given(message_soup())
def test_repair_makes_any_sequence_valid(messages):
    repaired = repair_tool_pairs(messages)
    assert pairing_problems(repaired.messages) == []
    non_tool = [i for i, m in enumerate(messages) if m["role"] != "tool"]
    assert [
        s for s in repaired.sources if s is not None and messages[s]["role"] != "tool"
    ] == non_tool


@given(messages=transcripts())
def test_repair_leaves_valid_transcripts_alone(messages):
    repaired = repair_tool_pairs(messages)
    assert repaired.sources == list(range(len(messages)))
