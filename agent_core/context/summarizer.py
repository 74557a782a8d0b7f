"""Phase 3: summarise the middle with bounded requests, chunked and merged as needed.

Every request fits a fixed share (40 %) of the smaller of the summary model's and the
main model's windows, so a small, cheap summary model works on a thread of any length
and the one-time fallback to the main model (a wrapper around the summary model) fits
too. When the middle (with the previous
summary) does not fit one request, it is cut into consecutive chunks, each summarised on
its own, and the chunk summaries (the previous summary first) are merged, in rounds when
even they do not fit one request. Every summary is at most half a request's room, so
each merge round at least halves the number of summaries: the number of calls grows
linearly with the size of the middle. Chunk summaries, and the merges of one round, run
concurrently (bounded), so a small summary model is fast on a long middle too.

Turns are sized by the exact token counts stored per message (plus what serialisation
adds), never by characters alone: hex and emoji-heavy text runs near 1.6 characters per
token. Instructions and earlier summaries, which have no stored count, are planned with a
cautious 3 characters per token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial

from agent_core.context.summary_prompt import (
    PromptContext,
    merge_prompt,
    request_messages,
    summarize_prompt,
)
from agent_core.errors import ProviderError
from agent_core.llm.model import ChatModel, Message

REQUEST_WINDOW_SHARE = 0.40
"""Share of the summary model's window one request may use."""
PLANNING_CHARS_PER_TOKEN = 3
REQUEST_OVERHEAD_TOKENS = 32
"""Chat-format tokens around the two request messages, with room to spare."""
SEPARATOR_TOKENS = 1
CHUNK_SUMMARY_RATIO = 0.20
MIN_CHUNK_SUMMARY_TOKENS = 256
OUTPUT_CHARS_PER_TOKEN = 4
"""Model output is cut at this many characters per budget token, bounding merge inputs."""
MIN_ROOM_TOKENS = 1_024
"""A request must leave at least this much room for turns after the instructions."""
TURN_ROOM_SHARE = 0.5
"""One turn may take at most this share of a request's room."""


def planning_tokens(text: str) -> int:
    """A cautious token estimate for sizing requests."""
    return -(-len(text) // PLANNING_CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """How large summary requests and their parts may be, in planning tokens."""

    request_tokens: int
    """The whole request: instructions, content and chat overhead."""
    instruction_tokens: int
    """The longest instructions any request kind carries."""

    @property
    def room(self) -> int:
        """Space for turns or summaries in one request."""
        return self.request_tokens - self.instruction_tokens

    @property
    def item_tokens(self) -> int:
        """The most one summary may take in a merge request: two always fit together."""
        return self.room // 2 - 2 * SEPARATOR_TOKENS

    @property
    def max_output_tokens(self) -> int:
        """The largest summary budget whose (cut) output stays within :attr:`item_tokens`."""
        return (self.item_tokens - 1) * PLANNING_CHARS_PER_TOKEN // OUTPUT_CHARS_PER_TOKEN

    @property
    def turn_chars(self) -> int:
        """The character cap for one serialised turn."""
        return int(self.room * TURN_ROOM_SHARE) * PLANNING_CHARS_PER_TOKEN

    @property
    def usable(self) -> bool:
        """Whether the window leaves enough room to summarise anything."""
        return self.room >= MIN_ROOM_TOKENS


def request_limits(window_tokens: int, context: PromptContext) -> RequestLimits:
    """The limits for summary requests of one compaction.

    Args:
        window_tokens: the smallest window a request may be sent to.
        context: the shared request settings (their length counts too).
    """
    longest = max(
        planning_tokens(summarize_prompt("", context, previous=" ")),
        planning_tokens(summarize_prompt("", context, part=(999, 999))),
        planning_tokens(merge_prompt(["", ""], context)),
    )
    system = planning_tokens(request_messages("")[0]["content"])
    return RequestLimits(
        request_tokens=int(window_tokens * REQUEST_WINDOW_SHARE),
        instruction_tokens=longest + system + REQUEST_OVERHEAD_TOKENS,
    )


class SummaryCalls:
    """Summary requests to one model: their output cut to the budget, their sizes recorded.

    Safe to use from several threads at once (chunk summaries run concurrently).

    Args:
        model: the model asked (the compressor hands in the summary model with its
            fallback to the main model already wrapped around it).
    """

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self._lock = threading.Lock()
        self.max_request_tokens = 0
        """The largest request sent, in planning tokens."""

    def complete(self, prompt: str, max_tokens: int, *, extra_tokens: int = 0) -> str:
        """The model's text for ``prompt``, at most ``max_tokens`` tokens long.

        Args:
            prompt: the request.
            max_tokens: the output budget.
            extra_tokens: what the prompt's turns take beyond their character estimate
                (their stored counts say so), for the recorded request size.

        Raises:
            ProviderError: the call failed.
        """
        messages: list[Message] = list(request_messages(prompt))
        size = sum(planning_tokens(str(m["content"])) for m in messages)
        size += REQUEST_OVERHEAD_TOKENS + extra_tokens
        with self._lock:
            self.max_request_tokens = max(self.max_request_tokens, size)
        result = self._model.complete(messages, max_tokens=max_tokens)
        text = (result.content or "").strip()
        limit = max_tokens * OUTPUT_CHARS_PER_TOKEN
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """What the summary calls produced."""

    text: str | None
    """The summary body; ``None`` when a call failed."""
    error: ProviderError | None = None
    chunks: int = 1
    """Parts the turns were cut into (1: a single request)."""


def pack(sizes: Sequence[int], room: int) -> list[range]:
    """Consecutive groups of items whose sizes (plus separators) fit ``room`` each."""
    groups: list[range] = []
    start = 0
    used = 0
    for index, size in enumerate(sizes):
        cost = size + SEPARATOR_TOKENS
        if index > start and used + cost > room:
            groups.append(range(start, index))
            start, used = index, 0
        used += cost
    if start < len(sizes):
        groups.append(range(start, len(sizes)))
    return groups


def _fit(text: str, max_tokens: int) -> str:
    """``text`` cut to ``max_tokens`` planning tokens."""
    limit = max_tokens * PLANNING_CHARS_PER_TOKEN
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(
    turns: Sequence[str],
    *,
    previous: str | None,
    context: PromptContext,
    models: SummaryCalls,
    limits: RequestLimits,
    turn_tokens: Sequence[int] | None = None,
    concurrency: int = 1,
) -> SummaryOutcome:
    """Summarise serialised ``turns`` (oldest first), updating ``previous`` if given.

    Args:
        turns: serialised turns, each within :attr:`RequestLimits.turn_chars`.
        previous: the previous summary body (without its identifier ledger).
        context: the shared settings; its budget is the final summary's and must not
            exceed :attr:`RequestLimits.max_output_tokens`.
        models: the model to call; it records request sizes.
        limits: the request limits the turns were serialised for.
        turn_tokens: a bound on each turn's tokens (from the stored counts); without it
            turns are planned by their length.
        concurrency: requests in flight at once; chunk summaries are independent of each
            other, and so are the merges of one round.

    Returns:
        The summary, or the error that stopped it.
    """
    previous = _fit(previous, limits.item_tokens) if previous else None
    estimated = [planning_tokens(t) for t in turns]
    sizes = (
        [max(e, n) for e, n in zip(estimated, turn_tokens, strict=True)]
        if turn_tokens is not None
        else estimated
    )

    def extra(chunk: Sequence[int]) -> int:
        return sum(sizes[i] - estimated[i] for i in chunk)

    try:
        if (planning_tokens(previous) if previous else 0) + sum(sizes) + len(sizes) <= limits.room:
            prompt = summarize_prompt("\n\n".join(turns), context, previous=previous)
            return SummaryOutcome(
                models.complete(
                    prompt, context.budget_tokens, extra_tokens=extra(range(len(turns)))
                )
            )
        chunks = pack(sizes, limits.room)
        requests: list[Callable[[], str]] = []
        for number, chunk in enumerate(chunks, 1):
            budget = min(
                context.budget_tokens,
                max(
                    MIN_CHUNK_SUMMARY_TOKENS,
                    int(sum(sizes[i] for i in chunk) * CHUNK_SUMMARY_RATIO),
                ),
            )
            prompt = summarize_prompt(
                "\n\n".join(turns[i] for i in chunk),
                replace(context, budget_tokens=budget),
                part=(number, len(chunks)),
            )
            requests.append(partial(models.complete, prompt, budget, extra_tokens=extra(chunk)))
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            items = ([previous] if previous else []) + _all(pool, requests)
            merged = _merge(items, context, models, limits, pool)
        return SummaryOutcome(merged, chunks=len(chunks))
    except ProviderError as error:
        return SummaryOutcome(None, error=error)


def _all(pool: ThreadPoolExecutor, requests: Sequence[Callable[[], str]]) -> list[str]:
    """The answers to ``requests``, in order, run on ``pool``; the first failure is raised.

    A single request runs on the caller's thread. After a failure the requests not yet
    started are cancelled: their answers could not be used.

    Raises:
        ProviderError: a request failed.
    """
    if len(requests) == 1:
        return [requests[0]()]
    futures = [pool.submit(request) for request in requests]
    try:
        return [future.result() for future in futures]
    finally:
        for future in futures:
            future.cancel()


def _merge(
    items: list[str],
    context: PromptContext,
    models: SummaryCalls,
    limits: RequestLimits,
    pool: ThreadPoolExecutor,
) -> str:
    """Merge summaries (oldest first) into one, in rounds while they do not fit one request.

    The merges of one round are independent: they form a tree whose levels run
    concurrently.

    Raises:
        ProviderError: a merge call failed.
    """
    while True:
        groups = pack([planning_tokens(item) for item in items], limits.room)
        # Items are at most item_tokens, so any two fit one request and each round shrinks.
        assert len(groups) < len(items), "summaries larger than half a request"
        if len(groups) == 1:
            return models.complete(merge_prompt(items, context), context.budget_tokens)
        merges = [
            partial(
                models.complete,
                merge_prompt([items[i] for i in group], context),
                context.budget_tokens,
            )
            for group in groups
            if len(group) > 1
        ]
        merged = iter(_all(pool, merges))
        items = [next(merged) if len(group) > 1 else items[group[0]] for group in groups]
