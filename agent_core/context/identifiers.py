"""The identifier ledger: exact strings from compacted turns, carried verbatim in the summary.

Summary models paraphrase, and a paraphrased commit hash or ticket number is worse than
none. So identifiers (URLs, UUIDs, hashes, e-mail addresses, paths, ticket references,
versions, code names) are extracted with regular expressions, not by the model, and
written into the summary's "Critical Identifiers" section: deduplicated, one per line,
most recent first, sized by what the compacted turns hold up to a ceiling of its own and
counted in the main model's tokens; what cannot fit is ranked (asked about, referenced
again, recent). What is not carried stays findable in the archived turns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

import re2

from agent_core.context.budget import MIN_SUMMARY_TOKENS, summary_ceiling_tokens
from agent_core.tokens import TokenCounter

LEDGER_HEADING = "## Critical Identifiers"
LEDGER_NOTE = (
    "(verbatim from the compacted turns, one per line, most recent first; "
    "older or unlisted ones are in this chat's archive: find them with session_search)"
)
"""Tells the model where what no longer fits the prompt went, and how to get it back."""
LEDGER_WINDOW_SHARE = 0.12
MAX_LEDGER_TOKENS = 16_000
"""The ledger's ceiling: 15,360 tokens at 128k. A freshly compacted session then holds
about the tail (20 % of the threshold), the summary's prose and at most this much, which
at 128k is under half of the compressor threshold (see ``compaction.triggers``)."""
LEDGER_SHARE = 0.75
"""On small windows, where the ceiling is below it, the ledger may take this share of the
summary budget instead. The prose gets whatever the ledger does not use, so a chat with
few identifiers loses nothing."""
MAX_IDENTIFIER_CHARS = 256
"""Longer matches (data blobs, giant URLs) are left to the archive."""
MIN_IDENTIFIER_CHARS = 2


class IdentifierKind(StrEnum):
    """What an extracted identifier is."""

    URL = "url"
    EMAIL = "email"
    UUID = "uuid"
    TICKET = "ticket"
    PATH = "path"
    HASH = "hash"
    VERSION = "version"
    CODE = "code"


_W = r"[\p{L}\p{N}_.@+-]"  # one character of a path segment
_LAST = r"[\p{L}\p{N}_@+-]+(?:\.[A-Za-z0-9]{1,8})+"  # a file name: "x.tar.gz", "Xorg.0.log"
_ALTERNATIVES: tuple[tuple[str, str, str], ...] = (
    # (group, prefix, body): the prefix must precede the identifier and is not part of
    # it (RE2 has no look-behind; a consumed prefix is never an identifier character).
    ("url", "", r"\b(?:https?|ftp|ssh|git|wss?)://[^\s<>\"'`]+|\bwww\.[^\s<>\"'`]+"),
    ("email", "", r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    (
        "uuid",
        "",
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    ),
    ("ticket", "", r"\b[\w.-]+/[\w.-]+#\d+\b|\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b"),
    ("issue", r"(?:^|[^\w&#])", r"#\d{1,7}\b"),
    ("relpath", "", rf"(?:~|\.\.?)/{_W}+(?:/{_W}+)*/?|\b{_W}+(?:/{_W}+)*/{_LAST}\b"),
    ("abspath", r"(?:^|[^\w/:.~])", rf"/{_W}+(?:/{_W}+)+/?|/{_LAST}\b"),
    ("winpath", "", r"\b[A-Za-z]:\\[^\s\"'<>|]+"),
    ("hex", "", r"\b0[xX][0-9a-fA-F]{4,64}\b"),
    (
        "version",
        "",
        r"\bv?\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?"
        r"(?:\+[0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?\b",
    ),
    # 7-64 hex digits with at least one digit and one letter (the length is checked after).
    ("hash", "", r"\b[0-9a-f]*(?:[0-9][0-9a-f]*[a-f]|[a-f][0-9a-f]*[0-9])[0-9a-f]*\b"),
    # Namespaced names (Clojure's "clojure.core/split-with", Perl's "Foo::Bar" below).
    ("namespaced", "", r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+/[A-Za-z_*+!?<>=][\w*+!?<>=-]*"),
    ("dotted", "", r"\b[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)+\b"),
    ("snake", "", r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*"),
    # camelCase / CamelCase / macOS: every capitalised run must be followed by lower case
    # or end a word after at least two lower-case letters, so shouting and typos ("mY",
    # "iTS", "inSANE", "pleasE") are not identifiers.
    (
        "camel",
        "",
        r"\b[A-Z]+[a-z0-9]+(?:[A-Z]+[a-z0-9]+)+\b|\b[a-z][a-z0-9]+(?:[A-Z]+[a-z0-9]+)+\b"
        r"|\b[a-z]{2,}[A-Z]{2,3}\b",
    ),
)
"""Every identifier pattern, in priority order: at one position the earlier alternative
wins, so a URL is never split into a path and names. They are RE2 expressions: matching is
linear in the text, whatever the text (a backtracking engine tried every start inside a
long crafted word and took seconds on a few kilobytes)."""
_GATED = ("url", "email", "uuid", "ticket", "issue", "relpath", "abspath", "winpath")
"""The alternatives left out of a pattern when the text lacks the characters they need."""


GATING_MARKS = ("www.", "@", "-", "#", "/", "\\")
"""Texts :func:`_needed` tells apart: their combinations reach every pattern it can ask for."""


def _needed(candidates: str) -> tuple[bool, ...]:
    """For each of :data:`_GATED`: whether ``candidates`` has the characters it needs."""
    dash = "-" in candidates
    slash = "/" in candidates
    return (
        "://" in candidates or "www." in candidates,
        "@" in candidates,
        dash,
        dash or "#" in candidates,
        "#" in candidates,
        slash,
        slash,
        "\\" in candidates,
    )


def _compile(expression: str) -> Any:
    options = re2.Options()
    options.max_mem = 64 << 20
    options.log_errors = False
    return re2.compile(expression.encode(), options)


@cache
def _pattern(needed: tuple[bool, ...]) -> tuple[Any, dict[int, str]]:
    """The pattern without the alternatives that cannot match, and its group names."""
    gated = dict(zip(_GATED, needed, strict=True))
    used = [(name, prefix, body) for name, prefix, body in _ALTERNATIVES if gated.get(name, True)]
    pattern = _compile("|".join(f"{prefix}(?P<{name}>{body})" for name, prefix, body in used))
    names = {index: name.decode() for name, index in pattern.groupindex.items()}
    return pattern, names


_WARMING_TEXT = (
    b"v1.4.0 1.4.0+a1b2c3d4e a1b2c3d4e5f60718 https://example.com/a/b?x=1&y=2 www.example.org "
    b"ops@example.com 123e4567-e89b-12d3-a456-426614174000 PROJ-1234 #42 owner/repo#7 "
    b"src/app/main.py /var/log/Xorg.0.log build/x.tar.gz C:\\Users\\x\\a.txt 0x7ffd3a2c "
    b"snake_case_name camelCaseName Foo::Bar foo.bar() --flag=1 ENV_VAR=2 2026-12-02 10.0.0.1"
)
"""Identifier-like text: matching it builds most of a pattern's RE2 DFA states ahead."""


def warm_patterns(samples: Iterable[str]) -> None:
    """Compile the patterns texts like ``samples`` need and build their DFA states.

    RE2 builds a pattern's DFA lazily, state by state, as texts reach them: without this,
    the first compaction of a process pays for it on its first few thousand messages.
    """
    for sample in samples:
        pattern, _ = _pattern(_needed(sample))
        for _match in pattern.finditer(_WARMING_TEXT):
            pass


_KIND_OF_GROUP = {
    "url": IdentifierKind.URL,
    "email": IdentifierKind.EMAIL,
    "uuid": IdentifierKind.UUID,
    "ticket": IdentifierKind.TICKET,
    "issue": IdentifierKind.TICKET,
    "relpath": IdentifierKind.PATH,
    "abspath": IdentifierKind.PATH,
    "winpath": IdentifierKind.PATH,
    "hex": IdentifierKind.HASH,
    "hash": IdentifierKind.HASH,
    "version": IdentifierKind.VERSION,
    "namespaced": IdentifierKind.CODE,
    "dotted": IdentifierKind.CODE,
    "snake": IdentifierKind.CODE,
    "camel": IdentifierKind.CODE,
}
_BACKTICKED = _compile(r"`([^`\n]{1,200})`")
_URL_TRAILING = ".,;:!?)]}'\""
_PUNCTUATION = ".,;:!?()[]{}\"'<>"
MIN_HASH_CHARS, MAX_HASH_CHARS = 7, 64


def _plain_word(word: str) -> bool:
    """A word no identifier pattern can match: letters in one case (or Title case), or digits.

    Filtering these out first lets the pattern run over a small fraction of the text,
    which keeps extraction cheap on transcripts of thousands of messages.
    """
    word = word.strip(_PUNCTUATION)
    if not word or word.isdigit():
        return True
    return word.isalpha() and (word.islower() or word.isupper() or word[1:].islower())


def _clean(group: str, value: str) -> str | None:
    """The identifier as it should be carried, or ``None`` when the match is noise."""
    if group in ("url", "relpath", "abspath", "winpath"):
        value = value.rstrip(_URL_TRAILING)
    elif group == "dotted":
        parts = value.replace("::", ".").split(".")
        if max(map(len, parts)) < 2 or ("::" in value and min(map(len, parts)) < 2):
            return None  # "e.g", "i.e", "bit::P"
    elif group == "hash" and not MIN_HASH_CHARS <= len(value) <= MAX_HASH_CHARS:
        return None
    if not MIN_IDENTIFIER_CHARS <= len(value) <= MAX_IDENTIFIER_CHARS:
        return None
    return value


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


def find_identifiers(text: str) -> list[tuple[IdentifierKind, str]]:
    """Identifiers in ``text`` with their kind (duplicates kept).

    Backticked spans come first, then the other identifiers in order of appearance.
    """
    found: list[tuple[IdentifierKind, str]] = []
    if "`" in text:
        data = _utf8(text)
        for quoted in _BACKTICKED.finditer(data):
            value = quoted.group(1).decode("utf-8", "replace").strip()
            if MIN_IDENTIFIER_CHARS <= len(value) <= MAX_IDENTIFIER_CHARS:
                found.append((IdentifierKind.CODE, value))
        text = _BACKTICKED.sub(b" ", data).decode("utf-8", "replace")
    candidates = " ".join([word for word in text.split() if not _plain_word(word)])
    if not candidates:
        return found
    pattern, names = _pattern(_needed(candidates))
    for match in pattern.finditer(_utf8(candidates)):
        index = match.lastindex
        group = names[index]
        value = _clean(group, match.group(index).decode("utf-8", "replace"))
        if value is not None:
            found.append((_KIND_OF_GROUP[group], value))
    return found


def recent_identifiers(texts: Sequence[str]) -> Iterator[str]:
    """Distinct identifiers in chronologically ordered ``texts``, most recent first.

    Lazy: a ledger that fills up after the most recent stretch never reads the rest.
    """
    seen: set[str] = set()
    for text in reversed(texts):
        for _kind, value in reversed(find_identifiers(text)):
            if value not in seen:
                seen.add(value)
                yield value


def identifier_set(texts: Iterable[str]) -> set[str]:
    """Every identifier in ``texts``: used to skip those the kept turns already show."""
    return {value for text in texts for _kind, value in find_identifiers(text)}


class LedgerCosts:
    """What ledger lines cost, counted exactly with the main model's tokenizer.

    Identifiers tokenise far worse than prose (random hex runs near 1.7 characters a
    token), so a character estimate undercounts the ledger by a quarter or more. Each line
    is the identifier and its newline, which the tokenizer always keeps apart, so the sum
    of the lines is the section's exact size.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self.frame = sum(counter.count_text(line) + 1 for line in (LEDGER_HEADING, LEDGER_NOTE))
        """The heading and the note: reserved before any line."""

    def line(self, value: str) -> int:
        """One identifier's line."""
        return self._counter.count_text(value) + 1


@dataclass(frozen=True, slots=True)
class Ledger:
    """The identifiers a summary carries and those left to the archive."""

    carried: tuple[str, ...]
    """Written into the summary, most recent first."""
    dropped: tuple[str, ...]
    """Read but did not fit the ledger's room. Once the candidates read fill twice the
    room, older identifiers are not read at all; all of them stay in the archived turns."""
    tokens: int = 0
    """The section's size in the main model's tokens (0 when nothing is carried)."""

    def render(self) -> str:
        """The "Critical Identifiers" section, or ``""`` when there is nothing to carry.

        One identifier per line, verbatim and undecorated: every character spent on
        decoration is a token an identifier could use, and the order (most recent first)
        is what the next compaction ranks the carried ones by.
        """
        if not self.carried:
            return ""
        return "\n".join((LEDGER_HEADING, LEDGER_NOTE, *self.carried))


@dataclass(frozen=True, slots=True)
class Candidate:
    """An identifier of the compacted turns, with what ranks it when not all fit."""

    value: str
    recency: int
    """0 for the most recent; larger is older."""
    tokens: int
    """Its ledger line's cost (:meth:`LedgerCosts.line`)."""
    mentions: int = 1
    """Compacted turns that name it: one referenced again is worth more."""
    asked: bool = False
    """Named in a message the bot answered (its asker's words)."""


def ledger_line_allowed(value: str) -> bool:
    """Whether ``value`` can be a ledger line that reads back as itself.

    A backticked span could look like a heading, the note or a line of the old bulleted
    format; such a value is left to the archive.
    """
    return not value.startswith(("## ", "- ", "("))


def rank_ledger(candidates: Sequence[Candidate], budget_tokens: int, costs: LedgerCosts) -> Ledger:
    """The identifiers to carry within ``budget_tokens``, most recent first.

    When everything fits, everything is carried. Otherwise the room goes first to
    identifiers the bot's askers named, then to those referenced more than once, each
    group most recent first; what is left over is dropped (and stays in the archive).
    """
    room = budget_tokens - costs.frame
    if not candidates or room <= 0:
        return Ledger((), tuple(c.value for c in candidates))
    if sum(c.tokens for c in candidates) <= room:
        chosen = {c.value for c in candidates}
    else:
        ranked = sorted(candidates, key=lambda c: (not c.asked, c.mentions < 2, c.recency))
        chosen = set()
        used = 0
        for candidate in ranked:
            if used + candidate.tokens <= room:
                chosen.add(candidate.value)
                used += candidate.tokens
    carried = [c for c in candidates if c.value in chosen]
    return Ledger(
        tuple(c.value for c in carried),
        tuple(c.value for c in candidates if c.value not in chosen),
        costs.frame + sum(c.tokens for c in carried) if carried else 0,
    )


def ledger_ceiling_tokens(context_length: int) -> int:
    """The most the ledger may take: ``min(12 % of the window, 16,000)`` tokens.

    Separate from the summary's own ceiling: the ledger never passes through the summary
    model, and a busy technical group needs far more room for verbatim identifiers than
    the prose needs for its story.
    """
    return min(int(context_length * LEDGER_WINDOW_SHARE), MAX_LEDGER_TOKENS)


def ledger_budget_tokens(summary_budget_tokens: int) -> int:
    """The ledger's share of a summary budget (what small windows fall back to)."""
    return int(summary_budget_tokens * LEDGER_SHARE)


def ledger_room_tokens(ledger_tokens: int) -> int:
    """A summary budget whose ledger share holds ``ledger_tokens``.

    One token spare, so the float share in :func:`ledger_budget_tokens` cannot round it
    below the need.
    """
    return math.ceil(ledger_tokens / LEDGER_SHARE) + 1


def ledger_room(summary_budget_tokens: int, context_length: int) -> int:
    """The ledger's room: its ceiling, or its share of a larger summary budget."""
    return max(ledger_budget_tokens(summary_budget_tokens), ledger_ceiling_tokens(context_length))


def ledger_max_tokens(context_length: int) -> int:
    """The most the ledger can take at this window, whatever the summary budget."""
    largest_budget = max(MIN_SUMMARY_TOKENS, summary_ceiling_tokens(context_length))
    return ledger_room(largest_budget, context_length)


def parse_ledger(summary: str) -> list[str]:
    """The identifiers a previous summary carried, in their order.

    Also reads the bulleted lines (``- value``) of summaries written before the ledger
    lost its bullets.
    """
    values: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line.strip() == LEDGER_HEADING
        elif inside and line and not line.startswith("("):
            values.append(line.removeprefix("- "))
    return values


def without_ledger(summary: str) -> str:
    """``summary`` without its "Critical Identifiers" section (rebuilt on every compaction)."""
    kept: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line.strip().lower() == LEDGER_HEADING.lower()
        if not inside:
            kept.append(line)
    return "\n".join(kept).strip()
