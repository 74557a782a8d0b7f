"""The tool-output ladder: per-tool truncation, stored results, a per-turn budget.

Each step is cheaper than the next and may make it unnecessary (seed 000 §6.1, §7.2-7.3):

1. :func:`truncate_output` bounds what any tool returns (characters, lines, line length),
   keeping the head and the tail with a marker between.
2. A single result over ``result_budget`` of the window (clamped to
   [:data:`RESULT_MIN_CHARS`, :data:`RESULT_MAX_CHARS`]) is stored and replaced by a
   preview and a ``ref`` the model pages through with ``read_tool_result``.
3. When all results of one response still exceed ``turn_budget`` of the window (clamped
   to [:data:`TURN_MIN_CHARS`, :data:`TURN_MAX_CHARS`]), the largest spill first until
   the rest fits.

Budgets are in characters: the window (tokens) times :data:`CHARS_PER_TOKEN`, so large
windows hit the historical caps and only small windows are really constrained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_core.config import ToolSettings
from agent_core.tokens import CHARS_PER_TOKEN
from agent_core.tools.base import ToolOutput

RESULT_MIN_CHARS = 8_000
RESULT_MAX_CHARS = 100_000
TURN_MIN_CHARS = 16_000
TURN_MAX_CHARS = 200_000
PREVIEW_CHARS = 1_500
"""How much of a stored result stays inline."""
HEAD_SHARE = 0.6
"""Of what truncation keeps, the share taken from the head (the rest is the tail)."""


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """Step 1: what one tool result may hold."""

    max_chars: int
    max_lines: int
    max_line_length: int

    @classmethod
    def from_settings(cls, settings: ToolSettings) -> OutputLimits:
        """The limits configured by ``HUBBUB_TOOL_MAX_*``."""
        return cls(settings.max_chars, settings.max_lines, settings.max_line_length)


def truncate_output(text: str, limits: OutputLimits) -> str:
    """``text`` within ``limits``: long lines cut, then head and tail kept with a marker.

    Idempotent for text already within the limits (it is returned unchanged).
    """
    lines = text.split("\n")
    if any(len(line) > limits.max_line_length for line in lines):
        lines = [_cut_line(line, limits.max_line_length) for line in lines]
    if len(lines) > limits.max_lines:
        head = max(1, int(limits.max_lines * HEAD_SHARE))
        tail = max(1, limits.max_lines - head - 1)
        omitted = len(lines) - head - tail
        lines = [*lines[:head], f"[… {omitted:,} lines omitted …]", *lines[-tail:]]
    text = "\n".join(lines)
    if len(text) > limits.max_chars:
        marker = f"\n[… {{n:,}} characters omitted of {len(text):,} …]\n"
        room = max(0, limits.max_chars - len(marker) - 12)
        head = int(room * HEAD_SHARE)
        tail = room - head
        omitted = len(text) - head - tail
        text = text[:head] + marker.format(n=omitted) + (text[-tail:] if tail else "")
    return text


def _cut_line(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    marker = f" [… {len(line) - limit:,} characters cut]"
    return line[: max(0, limit - len(marker))] + marker


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(max(value, low), high))


def result_threshold_chars(context_length: int, share: float = 0.15) -> int:
    """Step 2: the size of one result above which it is stored instead of inlined."""
    return _clamp(context_length * CHARS_PER_TOKEN * share, RESULT_MIN_CHARS, RESULT_MAX_CHARS)


def turn_budget_chars(context_length: int, share: float = 0.30) -> int:
    """Step 3: what all results of one model response may take together."""
    return _clamp(context_length * CHARS_PER_TOKEN * share, TURN_MIN_CHARS, TURN_MAX_CHARS)


class ResultStore(Protocol):
    """Where spilled results go; returns the unguessable ref the preview names."""

    def put(self, *, tool_call_id: str, tool_name: str, content: str) -> str:
        """Store ``content``; the ref reads it back only in the same session."""
        ...


@dataclass(frozen=True, slots=True)
class ToolResultDraft:
    """One tool call's output before the ladder's steps 2 and 3."""

    tool_call_id: str
    name: str
    """The name the model called (a bridge call keeps ``tool_call``)."""
    content: str
    is_error: bool = False
    storable: bool = True

    @classmethod
    def of(cls, call: dict[str, Any], output: ToolOutput) -> ToolResultDraft:
        """The draft for an OpenAI-format ``call`` and what running it gave."""
        function = call.get("function") or {}
        return cls(
            tool_call_id=str(call.get("id") or ""),
            name=str(function.get("name") or ""),
            content=output.content,
            is_error=output.is_error,
            storable=output.storable,
        )


@dataclass(frozen=True, slots=True)
class FittedResult:
    """A tool result as it goes into the transcript."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    stored_ref: str | None = None
    """Set when the full output was stored and ``content`` is its preview."""
    original_chars: int = 0

    def message(self) -> dict[str, Any]:
        """The OpenAI ``role: tool`` message."""
        return {
            "role": "tool",
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "content": self.content,
        }


def fit_results(
    results: Sequence[ToolResultDraft],
    *,
    context_length: int,
    store: ResultStore,
    settings: ToolSettings | None = None,
) -> list[FittedResult]:
    """Steps 2 and 3 of the ladder over one response's results, in their order.

    Args:
        results: every tool result of one model response.
        context_length: the main model's window in tokens.
        store: where spilled results are kept (the caller's unit of work).
        settings: the budgets; the defaults when ``None``.
    """
    settings = settings or ToolSettings()
    single = result_threshold_chars(context_length, settings.result_budget)
    budget = turn_budget_chars(context_length, settings.turn_budget)
    fitted = [
        FittedResult(r.tool_call_id, r.name, r.content, r.is_error, None, len(r.content))
        for r in results
    ]
    for index, result in enumerate(results):
        if result.storable and len(result.content) > single:
            fitted[index] = _spill(result, store)
    total = sum(len(f.content) for f in fitted)
    if total <= budget:
        return fitted
    candidates = sorted(
        (i for i, r in enumerate(results) if r.storable and fitted[i].stored_ref is None),
        key=lambda i: len(results[i].content),
        reverse=True,
    )
    for index in candidates:
        if total <= budget:
            break
        if len(results[index].content) <= PREVIEW_CHARS * 2:
            break  # spilling what is left would not save anything worth a lookup
        spilled = _spill(results[index], store)
        total += len(spilled.content) - len(fitted[index].content)
        fitted[index] = spilled
    return fitted


def _spill(result: ToolResultDraft, store: ResultStore) -> FittedResult:
    ref = store.put(tool_call_id=result.tool_call_id, tool_name=result.name, content=result.content)
    return FittedResult(
        result.tool_call_id,
        result.name,
        preview(result.content, ref),
        result.is_error,
        ref,
        len(result.content),
    )


def preview(content: str, ref: str) -> str:
    """The inline stand-in of a stored result: its start and how to read the rest."""
    shown = content[:PREVIEW_CHARS]
    lines = content.count("\n") + 1
    return (
        f"{shown}\n\n[Tool result too large for the context: {len(content):,} characters, "
        f"{lines:,} lines; the first {len(shown):,} characters are shown above. Read the rest "
        f'with read_tool_result(ref="{ref}", offset={len(shown)}).]'
    )
