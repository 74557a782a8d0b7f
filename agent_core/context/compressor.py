"""The built-in context engine: prune, cut, summarise, mark, repair.

It orchestrates the phases (each a separately tested module) and turns their output into
a :class:`CompressionResult` indexed against its input, and the engine state into its
next value. Failures are data: an auth or network failure of the summary call aborts
with nothing changed; any other failure uses the deterministic digest; both start a
cooldown the caller persists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from agent_core.config import CompressionSettings
from agent_core.context.boundaries import Boundaries, find_boundaries
from agent_core.context.budget import MIN_SUMMARY_TOKENS, summary_budget_tokens
from agent_core.context.engine import Clock, ContextEngine, utc_now
from agent_core.context.fallback import fallback_summary
from agent_core.context.identifiers import (
    Candidate,
    Ledger,
    LedgerCosts,
    find_identifiers,
    identifier_set,
    ledger_budget_tokens,
    ledger_line_allowed,
    ledger_room,
    ledger_room_tokens,
    parse_ledger,
    rank_ledger,
    without_ledger,
)
from agent_core.context.markers import find_latest_summary, is_summary_message, summary_message
from agent_core.context.media import strip_historical_media
from agent_core.context.pruning import prune
from agent_core.context.redaction import REDACTED, has_secret, redact
from agent_core.context.repair import repair_tool_pairs
from agent_core.context.result import CompressionOutcome, CompressionResult, Strategy
from agent_core.context.serialization import (
    DEFAULT_CAP,
    MESSAGE_CHAR_CAP,
    capped_redacted_all,
    message_body,
    serialize_turn,
)
from agent_core.context.state import EngineState
from agent_core.context.summarizer import (
    SummaryCalls,
    request_limits,
    summarize,
)
from agent_core.context.summary_prompt import PromptContext
from agent_core.context.transcript import (
    ChatMessage,
    Message,
    is_visible_reply,
    message_tokens,
    speaker_of,
    tool_calls_by_id,
)
from agent_core.errors import ConfigError, ProviderAuthError, ProviderError, ProviderUnavailable
from agent_core.llm.fallback import FallbackModel
from agent_core.llm.model import ChatModel
from agent_core.llm.wrapper import Meter, MeteredModel, TextRequired
from agent_core.tokens import TokenCounter, rough_message_tokens

MIN_COMPRESSIBLE_TOKENS = MIN_SUMMARY_TOKENS
"""A middle smaller than the smallest summary budget is not worth a model call."""
ABORTING_ERRORS: tuple[type[ProviderError], ...] = (ProviderAuthError, ProviderUnavailable)
"""Summary failures that abort: retrying later loses nothing, a digest would."""
FAILURE_COOLDOWN = timedelta(seconds=60)
AUTH_FAILURE_COOLDOWN = timedelta(minutes=10)
"""Bad credentials do not fix themselves quickly; retrying sooner only adds failures."""
TAIL_SHARE_OF_MESSAGE_LIMIT = 0.5
"""The tail holds at most this share of the hard message limit, so a compaction triggered by
the limit gets the transcript well below it instead of re-triggering on the next turn."""
MAX_FOCUS_TOPIC_CHARS = 500
REDACTED_TOKENS = 4
"""What one ``[REDACTED]`` costs at most (a secret it replaces costs at least one)."""
MIN_GROUP_SPEAKERS = 2


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a compaction will work on."""

    tokens: list[int]
    boundaries: Boundaries
    middle: list[int]
    """Middle indices of real messages (earlier summary messages excluded)."""
    previous: str | None
    """The previous summary body, from the transcript or the stored state."""


@dataclass(frozen=True, slots=True)
class _Draft:
    """A new summary body, or the failure that prevented one (with the digest to use)."""

    body: str
    """The body with its ledger: the model's summary, or the deterministic digest."""
    strategy: Strategy
    ledger: Ledger
    error: ProviderError | None
    calls: int
    max_request_tokens: int
    model_name: str
    model_fallback_used: bool


def turn_token_bound(stored_tokens: int, body: str, turn: str) -> int:
    """A bound on a serialised turn's tokens from its message's stored (exact) count.

    The body is the message's text capped and redacted (never longer in tokens, but for
    the few each ``[REDACTED]`` may add); every character serialisation adds around it
    (label, quotes, escapes) is counted as a token of its own.
    """
    added = max(0, len(turn) - len(body))
    return stored_tokens + added + REDACTED_TOKENS * body.count(REDACTED)


class ContextCompressor(ContextEngine):
    """Compacts a transcript into head + summary + tail.

    Args:
        settings: the compression settings.
        model: the main model (its window sets the threshold; it is the summary fallback).
        summary_model: the auxiliary summary model; ``None`` uses the main model.
        state: the session's stored state.
        clock: the time source.

    Raises:
        ConfigError: the summary model's window cannot hold a summary request.
    """

    name = "compressor"

    def __init__(
        self,
        settings: CompressionSettings,
        *,
        model: ChatModel,
        summary_model: ChatModel | None = None,
        state: EngineState | None = None,
        clock: Clock = utc_now,
    ) -> None:
        super().__init__(
            settings,
            context_length=model.context_length,
            max_output_tokens=model.max_output_tokens,
            state=state,
            clock=clock,
        )
        self._model = model
        self._summary_model = summary_model or model
        self._ledger_costs = LedgerCosts(TokenCounter.for_model(model.name))
        """The ledger is read by the main model: its lines are counted in its tokens."""
        # Requests must also fit the main model, which is the fallback.
        self._request_window = min(self._summary_model.context_length, model.context_length)
        probe = PromptContext(self._today(), MIN_SUMMARY_TOKENS)
        if not request_limits(self._request_window, probe).usable:
            raise ConfigError(
                f"the summary model {self._summary_model.name} has a {self._request_window:,}"
                "-token window, too small for summary requests; set HUBBUB_COMPRESSION_MODEL "
                "or HUBBUB_COMPRESSION_CONTEXT_LENGTH"
            )

    def _today(self) -> date:
        """Today in the configured zone: the summary's dates match the system prompt's."""
        return self._clock().astimezone(ZoneInfo(self.settings.timezone)).date()

    @property
    def tail_budget_tokens(self) -> int:
        """The protected tail's token budget: threshold x target ratio."""
        return int(self.threshold_tokens * self.settings.target_ratio)

    def has_content_to_compress(
        self, messages: Sequence[Message], *, token_counts: Sequence[int] | None = None
    ) -> bool:
        """Whether anything lies outside the protected head and tail."""
        return bool(self._plan(messages, token_counts).middle)

    def compress(
        self,
        messages: Sequence[Message],
        *,
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        token_counts: Sequence[int] | None = None,
    ) -> CompressionResult:
        """Compact ``messages`` into head + summary + tail.

        The engine state is updated: read :attr:`state` afterwards and persist it.

        Raises:
            ValueError: ``token_counts`` does not match ``messages``.
        """
        now = self._clock()
        if not force and self._state.in_cooldown(now):
            detail = self._state.cooldown_reason or ""
            return _unchanged(messages, CompressionOutcome.COOLDOWN, detail)
        plan = self._plan(messages, token_counts)
        if not plan.middle:
            return self._ineffective(messages, plan, CompressionOutcome.NOTHING_TO_COMPRESS)
        middle_tokens = sum(plan.tokens[i] for i in plan.middle)
        if not force and middle_tokens < MIN_COMPRESSIBLE_TOKENS:
            return self._ineffective(messages, plan, CompressionOutcome.TOO_SMALL)
        first_changeable = next(
            (i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages)
        )
        pruned = prune(messages, first_changeable, plan.boundaries.tail_start)
        draft = self._draft(messages, pruned.messages, plan, focus_topic)
        cooldown = None
        if draft.error is not None:
            pause = (
                AUTH_FAILURE_COOLDOWN
                if isinstance(draft.error, ProviderAuthError)
                else FAILURE_COOLDOWN
            )
            cooldown = now + pause
            self._state = replace(
                self._state,
                cooldown_until=cooldown,
                cooldown_reason=f"summary failed: {draft.error}",
            )
            if isinstance(draft.error, ABORTING_ERRORS) or self.settings.abort_on_summary_failure:
                return _with_draft(
                    _unchanged(messages, CompressionOutcome.ABORTED, str(draft.error), plan),
                    draft,
                    cooldown_until=cooldown,
                )
        return self._apply(messages, pruned.messages, plan, draft, current_tokens, cooldown)

    def _plan(self, messages: Sequence[Message], token_counts: Sequence[int] | None) -> _Plan:
        tokens = message_tokens(messages, token_counts)
        # The stored summary is authoritative; one found in the transcript serves callers
        # that do not persist the state.
        found = None if self._state.summary else find_latest_summary(messages)
        previous = self._state.summary or (found[1] if found else None)
        boundaries = find_boundaries(
            messages,
            tokens,
            protect_first_n=self.settings.protect_first_n,
            protect_last_n=self.settings.protect_last_n,
            tail_budget_tokens=self.tail_budget_tokens,
            decayed=previous is not None or self._state.compression_count > 0,
            max_tail_messages=int(self.settings.hard_message_limit * TAIL_SHARE_OF_MESSAGE_LIMIT),
        )
        middle = [i for i in boundaries.middle if not is_summary_message(messages[i])]
        return _Plan(tokens, boundaries, middle, previous)

    def _draft(
        self,
        messages: Sequence[Message],
        pruned: Sequence[Message],
        plan: _Plan,
        focus_topic: str | None,
    ) -> _Draft:
        """Serialise the middle, build the ledger and ask the summary model(s)."""
        speaker_names = [speaker_of(m) for m in messages]
        speakers = Counter(s for i in plan.middle if (s := speaker_names[i]))
        carried = parse_ledger(plan.previous) if plan.previous else []
        context = PromptContext(
            today=self._today(),
            budget_tokens=summary_budget_tokens(
                sum(plan.tokens[i] for i in plan.middle),
                self.context_length,
                carried_tokens=ledger_room_tokens(
                    sum(self._ledger_costs.line(value) for value in carried)
                ),
            ),
            focus_topic=focus_topic[:MAX_FOCUS_TOPIC_CHARS] if focus_topic else None,
            participants=(
                tuple(name for name, _ in speakers.most_common())
                if len(speakers) >= MIN_GROUP_SPEAKERS
                else ()
            ),
        )
        limits = request_limits(self._request_window, context)
        cap = DEFAULT_CAP.within(limits.turn_chars)
        tool_names = {call_id: name for call_id, (name, _) in tool_calls_by_id(messages).items()}
        # The ledger reads the original text; the model reads the pruned one.
        originals = capped_redacted_all([message_body(messages[i]) for i in plan.middle], cap)
        turns: list[str] = []
        for index, body in zip(plan.middle, originals, strict=True):
            if pruned[index] is messages[index]:
                turns.append(serialize_turn(messages[index], tool_names, cap, body=body))
            else:
                turns.append(serialize_turn(pruned[index], tool_names, cap))
        # The ledger never passes through the summary model, so only the model's share of
        # the budget is bounded by the summary model's window. The ledger takes what the
        # compacted turns' identifiers need, up to its own ceiling; the prose keeps at
        # least its share of the budget.
        room = ledger_room(context.budget_tokens, self.context_length)
        ledger = self._ledger(pruned, plan, originals, speaker_names, carried, room)
        prose = max(
            context.budget_tokens - ledger.tokens,
            context.budget_tokens - ledger_budget_tokens(context.budget_tokens),
        )
        model_budget = min(prose, limits.max_output_tokens)
        context = replace(context, budget_tokens=max(1, model_budget))
        previous = without_ledger(plan.previous) if plan.previous else None
        requests = Meter()
        summary_model = self._summary_chain(requests)
        models = SummaryCalls(summary_model)
        outcome = summarize(
            turns,
            previous=previous or None,
            context=context,
            models=models,
            limits=limits,
            concurrency=self.settings.summary_concurrency,
            turn_tokens=[
                turn_token_bound(plan.tokens[i], body, turn)
                for i, body, turn in zip(plan.middle, originals, turns, strict=True)
            ],
        )
        if outcome.text is None:
            reason = str(outcome.error)
            text = fallback_summary(
                turns, previous=previous, budget_tokens=context.budget_tokens, reason=reason
            )
            strategy = Strategy.FALLBACK
        else:
            text = outcome.text
            strategy = Strategy.CHUNKED_SUMMARY if outcome.chunks > 1 else Strategy.SUMMARY
        sections = (redact(without_ledger(text)), ledger.render())
        return _Draft(
            body="\n\n".join(part for part in sections if part),
            strategy=strategy,
            ledger=ledger,
            error=outcome.error,
            calls=requests.calls,
            max_request_tokens=models.max_request_tokens,
            model_name=summary_model.name,
            model_fallback_used=isinstance(summary_model, FallbackModel)
            and summary_model.fell_back,
        )

    def _summary_chain(self, requests: Meter) -> ChatModel:
        """The model summaries are asked of, for one compaction.

        The summary model, switching once to the main model when it fails; a blank answer
        counts as a failure. Without a separate summary model, the main model alone.
        Every request sent, failed ones included, is counted on ``requests``.
        """
        main = TextRequired(MeteredModel(self._model, requests))
        summary = self._summary_model
        if summary is self._model or summary.name == self._model.name:
            return main
        return FallbackModel(TextRequired(MeteredModel(summary, requests)), main)

    def _ledger(
        self,
        pruned: Sequence[Message],
        plan: _Plan,
        originals: list[str],
        speaker_names: Sequence[str | None],
        carried: list[str],
        budget: int,
    ) -> Ledger:
        """The identifiers of the compacted turns that the kept turns do not already show.

        Args:
            pruned: the transcript after pruning (what the kept turns will show).
            plan: the compaction plan.
            originals: the capped, redacted original text of each middle message.
            speaker_names: the group speaker of each message, if any.
            carried: the identifiers the previous summary carried, in its order.
            budget: the ledger's room, in tokens.
        """
        kept_indices = (
            *range(plan.boundaries.head_end),
            *plan.boundaries.pinned,
            *range(plan.boundaries.tail_start, len(pruned)),
        )
        kept = identifier_set(
            message_body(pruned[i])[:MESSAGE_CHAR_CAP]
            for i in kept_indices
            if not is_summary_message(pruned[i])
        )
        # The kept turns name their speakers ("[bob_2] …"). Other names that look like
        # identifiers in the compacted turns' text are carried like any other identifier.
        kept |= {name for i in kept_indices if (name := speaker_names[i])}
        candidates = self._candidates(pruned, plan, originals, carried, kept, budget)
        return rank_ledger(candidates, budget, self._ledger_costs)

    def _candidates(
        self,
        pruned: Sequence[Message],
        plan: _Plan,
        originals: list[str],
        carried: list[str],
        kept: set[str],
        budget: int,
    ) -> list[Candidate]:
        """The ledger's candidates, most recent first, read until twice ``budget`` is found.

        Reading stops there (an old night's identifiers are left to the archive unread),
        so the work stays proportional to what a ledger can carry. The ledger is never
        redacted as a whole (its lines are verbatim), so each value is checked: one
        carried from an older summary, or one the redactor recognises only on its own,
        never reaches the stored summary.
        """
        found: dict[str, Candidate] = {}
        cost = 0

        def add(value: str, asked: bool) -> None:
            nonlocal cost
            if value in kept:
                return
            old = found.get(value)
            if old is not None:
                found[value] = replace(old, mentions=old.mentions + 1, asked=old.asked or asked)
            elif ledger_line_allowed(value) and not has_secret(value):
                tokens = self._ledger_costs.line(value)
                found[value] = Candidate(value, len(found), tokens, asked=asked)
                cost += tokens

        for position in range(len(originals) - 1, -1, -1):
            if cost >= 2 * budget:
                break
            index = plan.middle[position]
            following = pruned[index + 1] if index + 1 < len(pruned) else None
            asked = (
                pruned[index].get("role") == "user"
                and following is not None
                and (is_visible_reply(following))
            )
            for value in dict.fromkeys(
                v for _, v in reversed(find_identifiers(originals[position]))
            ):
                add(value, asked)
        for value in carried:
            if cost >= 2 * budget:
                break
            add(value, False)
        return list(found.values())

    def _apply(
        self,
        messages: Sequence[Message],
        pruned: Sequence[Message],
        plan: _Plan,
        draft: _Draft,
        current_tokens: int | None,
        cooldown: datetime | None,
    ) -> CompressionResult:
        """Assemble head + summary + tail, repair it and record the compaction."""
        # The new summary replaces every earlier one, wherever the boundaries put it.
        head = [i for i in range(plan.boundaries.head_end) if not is_summary_message(messages[i])]
        tail = [
            i
            for i in range(plan.boundaries.tail_start, len(messages))
            if not is_summary_message(messages[i])
        ]
        pinned = list(plan.boundaries.pinned)
        summary = summary_message(draft.body)
        assembled = [
            *(pruned[i] for i in head),
            summary,
            *(pruned[i] for i in pinned),
            *(messages[i] for i in tail),
        ]
        positions: list[int | None] = [*head, None, *pinned, *tail]
        repaired = repair_tool_pairs(assembled)
        out = repaired.messages
        sources = [None if s is None else positions[s] for s in repaired.sources]
        for position, replacement in strip_historical_media(out).items():
            out[position] = replacement
        tokens_before = sum(plan.tokens)
        tokens_after = 0
        rewritten: dict[int, ChatMessage] = {}
        for message, source in zip(out, sources, strict=True):
            if source is not None and message is messages[source]:
                tokens_after += plan.tokens[source]
                continue
            tokens_after += rough_message_tokens(message)
            if source is not None:
                rewritten[source] = dict(message)
        if tokens_after >= tokens_before:
            return _with_draft(
                self._ineffective(messages, plan, CompressionOutcome.NO_SAVINGS), draft
            )
        kept = {s for s in sources if s is not None}
        state = self._state
        self._state = replace(
            state,
            compression_count=state.compression_count + 1,
            summary=draft.body,
            summary_version=state.summary_version + 1,
            cooldown_until=cooldown,
            cooldown_reason=state.cooldown_reason if cooldown else None,
            last_prompt_tokens=0,
            awaiting_real_usage=True,
            tokens_before_compaction=(
                current_tokens
                if current_tokens is not None
                else max(state.last_prompt_tokens, tokens_before)
            ),
            post_compaction_rough=sum(rough_message_tokens(m) for m in out),
            fit_proven=False,
        )
        return _with_draft(
            CompressionResult(
                outcome=CompressionOutcome.COMPRESSED,
                messages=out,
                sources=tuple(sources),
                detail=str(draft.error) if draft.error else "",
                summary=draft.body,
                summary_version=self._state.summary_version,
                summary_index=next(i for i, m in enumerate(out) if m is summary),
                archived_indices=tuple(i for i in range(len(messages)) if i not in kept),
                rewritten=rewritten,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                fallback_used=draft.error is not None,
                identifiers_dropped=draft.ledger.dropped,
            ),
            draft,
            cooldown_until=cooldown,
        )

    def _ineffective(
        self, messages: Sequence[Message], plan: _Plan, outcome: CompressionOutcome
    ) -> CompressionResult:
        """A compaction that could not help: counted, so automatic attempts stop repeating."""
        self._state = replace(self._state, ineffective_count=self._state.ineffective_count + 1)
        return _unchanged(messages, outcome, "", plan)


def _unchanged(
    messages: Sequence[Message],
    outcome: CompressionOutcome,
    detail: str,
    plan: _Plan | None = None,
) -> CompressionResult:
    """A result that leaves the transcript as it was."""
    total = sum(plan.tokens) if plan else 0
    return CompressionResult(
        outcome=outcome,
        messages=list(messages),
        sources=tuple(range(len(messages))),
        detail=detail,
        tokens_before=total,
        tokens_after=total,
    )


def _with_draft(
    result: CompressionResult, draft: _Draft, *, cooldown_until: datetime | None = None
) -> CompressionResult:
    """``result`` with the summary calls' statistics."""
    return replace(
        result,
        strategy=draft.strategy if result.applied else Strategy.NONE,
        summary_calls=draft.calls,
        max_summary_request_tokens=draft.max_request_tokens,
        summary_model=draft.model_name,
        model_fallback_used=draft.model_fallback_used,
        identifiers_carried=draft.ledger.carried if result.applied else (),
        cooldown_until=cooldown_until,
    )
