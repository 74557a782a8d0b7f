"""Phase 3: summarise the middle with bounded requests, chunked and merged as needed.

Every request fits a fixed share (40 %) of the smaller of the summary model's and the
main model's windows, so a small, cheap summary model works on a thread of any length
and the one-time fallback to the main model fits too. When the middle (with the previous
summary) does not fit one request, it is cut into consecutive chunks, each summarised on
its own, and the chunk summaries (the previous summary first) are merged, in rounds when
even they do not fit one request. Every summary is at most half a request's room, so
each merge round at least halves the number of summaries: the number of calls grows
linearly with the size of the middle.

Turns are sized by the exact token counts stored per message (plus what serialisation
adds), never by characters alone: hex and emoji-heavy text runs near 1.6 characters per
token. Instructions and earlier summaries, which have no stored count, are planned with a
cautious 3 characters per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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


class EmptySummaryError(ProviderError):
    """The summary model answered without any text."""


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


class SummaryModels:
    """The summary model, falling back once to the main model when a call fails.

    Args:
        summary_model: the auxiliary model asked first.
        main_model: the model asked after the auxiliary one failed; ignored when it is the
            same model.
    """

    def __init__(self, summary_model: ChatModel, main_model: ChatModel) -> None:
        self._models = [summary_model]
        if main_model is not summary_model and main_model.name != summary_model.name:
            self._models.append(main_model)
        self._current = 0
        self.calls = 0
        """Requests sent, failed ones included."""
        self.max_request_tokens = 0
        """The largest request sent, in planning tokens."""

    @property
    def fell_back(self) -> bool:
        """Whether the main model replaced the summary model."""
        return self._current > 0

    @property
    def model_name(self) -> str:
        """The model currently asked."""
        return self._models[self._current].name

    def complete(self, prompt: str, max_tokens: int, *, extra_tokens: int = 0) -> str:
        """The model's text for ``prompt``, at most ``max_tokens`` tokens long.

        Args:
            prompt: the request.
            max_tokens: the output budget.
            extra_tokens: what the prompt's turns take beyond their character estimate
                (their stored counts say so), for the recorded request size.

        Raises:
            ProviderError: the call failed and no fallback is left.
        """
        messages: list[Message] = list(request_messages(prompt))
        size = sum(planning_tokens(str(m["content"])) for m in messages)
        size += REQUEST_OVERHEAD_TOKENS + extra_tokens
        while True:
            model = self._models[self._current]
            self.calls += 1
            self.max_request_tokens = max(self.max_request_tokens, size)
            try:
                result = model.complete(messages, max_tokens=max_tokens)
                text = (result.content or "").strip()
                if not text:
                    raise EmptySummaryError(model.name, "the summary model returned no text")
            except ProviderError:
                if self._current + 1 >= len(self._models):
                    raise
                self._current += 1
                continue
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
    models: SummaryModels,
    limits: RequestLimits,
    turn_tokens: Sequence[int] | None = None,
) -> SummaryOutcome:
    """Summarise serialised ``turns`` (oldest first), updating ``previous`` if given.

    Args:
        turns: serialised turns, each within :attr:`RequestLimits.turn_chars`.
        previous: the previous summary body (without its identifier ledger).
        context: the shared settings; its budget is the final summary's and must not
            exceed :attr:`RequestLimits.max_output_tokens`.
        models: the models to call; they count calls and request sizes.
        limits: the request limits the turns were serialised for.
        turn_tokens: a bound on each turn's tokens (from the stored counts); without it
            turns are planned by their length.

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
        items = [previous] if previous else []
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
            items.append(models.complete(prompt, budget, extra_tokens=extra(chunk)))
        return SummaryOutcome(_merge(items, context, models, limits), chunks=len(chunks))
    except ProviderError as error:
        return SummaryOutcome(None, error=error)


def _merge(
    items: list[str], context: PromptContext, models: SummaryModels, limits: RequestLimits
) -> str:
    """Merge summaries (oldest first) into one, in rounds while they do not fit one request.

    Raises:
        ProviderError: a merge call failed.
    """
    while True:
        groups = pack([planning_tokens(item) for item in items], limits.room)
        # Items are at most item_tokens, so any two fit one request and each round shrinks.
        assert len(groups) < len(items), "summaries larger than half a request"
        if len(groups) == 1:
            return models.complete(merge_prompt(items, context), context.budget_tokens)
        items = [
            models.complete(merge_prompt([items[i] for i in group], context), context.budget_tokens)
            if len(group) > 1
            else items[group[0]]
            for group in groups
        ]
