"""The identifier ledger: exact strings from compacted turns, carried verbatim in the summary.

Summary models paraphrase, and a paraphrased commit hash or ticket number is worse than
none. So identifiers (URLs, UUIDs, hashes, e-mail addresses, paths, ticket references,
versions, code names) are extracted with regular expressions, not by the model, and
written into the summary's "Critical Identifiers" section: deduplicated, most recent
first, within a fixed share of the summary budget. What does not fit stays findable in
the archived turns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

import re2

LEDGER_HEADING = "## Critical Identifiers"
LEDGER_NOTE = (
    "(verbatim from the compacted turns, most recent first; older or unlisted ones are in "
    "this chat's archive: find them with session_search)"
)
"""Tells the model where what no longer fits the prompt went, and how to get it back."""
LEDGER_SHARE = 0.75
"""Most of the summary budget the ledger may take. The prose gets whatever the ledger does
not use, so a chat with few identifiers loses nothing; a busy technical group (hundreds of
paths and URLs a night) keeps them verbatim rather than paraphrased."""
LEDGER_CHARS_PER_TOKEN = 3
"""Identifiers tokenise worse than prose (hashes, paths), so the ledger is sized cautiously."""
LEDGER_LINE_OVERHEAD_TOKENS = 2
"""The ``- `` bullet and the newline of each ledger line."""
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


def identifier_tokens(value: str) -> int:
    """What one ledger line costs, estimated cautiously."""
    return -(-len(value) // LEDGER_CHARS_PER_TOKEN) + LEDGER_LINE_OVERHEAD_TOKENS


MIN_LINE_TOKENS = identifier_tokens("x" * MIN_IDENTIFIER_CHARS)
"""The cheapest ledger line: with less room left, the ledger is full."""


@dataclass(frozen=True, slots=True)
class Ledger:
    """The identifiers a summary carries and those left to the archive."""

    carried: tuple[str, ...]
    """Written into the summary, most recent first."""
    dropped: tuple[str, ...]
    """Read but did not fit the ledger's share of the budget. Once the ledger is full the
    older identifiers are not read at all; all of them stay in the archived turns."""

    @property
    def tokens(self) -> int:
        """The ledger section's estimated size."""
        if not self.carried:
            return 0
        header = -(-(len(LEDGER_HEADING) + len(LEDGER_NOTE)) // LEDGER_CHARS_PER_TOKEN)
        return header + sum(identifier_tokens(v) for v in self.carried)

    def render(self) -> str:
        """The "Critical Identifiers" section, or ``""`` when there is nothing to carry."""
        if not self.carried:
            return ""
        lines = [LEDGER_HEADING, LEDGER_NOTE, *(f"- {value}" for value in self.carried)]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Candidate:
    """An identifier of the compacted turns, with what ranks it when not all fit."""

    value: str
    recency: int
    """0 for the most recent; larger is older."""
    mentions: int = 1
    """Compacted turns that name it: one referenced again is worth more."""
    asked: bool = False
    """Named in a message the bot answered (its asker's words)."""


def rank_ledger(candidates: Sequence[Candidate], budget_tokens: int) -> Ledger:
    """The identifiers to carry within ``budget_tokens``, most recent first.

    When everything fits, everything is carried. Otherwise the room goes first to
    identifiers the bot's askers named, then to those referenced more than once, each
    group most recent first; what is left over is dropped (and stays in the archive).
    """
    if sum(identifier_tokens(c.value) for c in candidates) <= budget_tokens:
        return Ledger(tuple(c.value for c in candidates), ())
    ranked = sorted(candidates, key=lambda c: (not c.asked, c.mentions < 2, c.recency))
    chosen: set[str] = set()
    used = 0
    for candidate in ranked:
        cost = identifier_tokens(candidate.value)
        if used + cost <= budget_tokens:
            chosen.add(candidate.value)
            used += cost
    carried = tuple(c.value for c in candidates if c.value in chosen)
    return Ledger(carried, tuple(c.value for c in candidates if c.value not in chosen))


def build_ledger(candidates: Iterable[str], budget_tokens: int) -> Ledger:
    """Fit ``candidates`` (most recent first) into ``budget_tokens``.

    A long identifier that does not fit is skipped rather than ending the ledger, so
    shorter older ones can still use the room. Once not even the shortest identifier
    fits, the rest of ``candidates`` is not read.
    """
    carried: list[str] = []
    dropped: list[str] = []
    used = 0
    for value in candidates:
        if budget_tokens - used < MIN_LINE_TOKENS:
            break
        cost = identifier_tokens(value)
        if used + cost <= budget_tokens:
            carried.append(value)
            used += cost
        else:
            dropped.append(value)
    return Ledger(tuple(carried), tuple(dropped))


def ledger_budget_tokens(summary_budget_tokens: int) -> int:
    """The ledger's fixed share of a summary budget."""
    return int(summary_budget_tokens * LEDGER_SHARE)


def ledger_room_tokens(values: Sequence[str]) -> int:
    """A summary budget whose ledger share holds ``values`` whole.

    One token spare, so the float share in :func:`ledger_budget_tokens` cannot round it
    below the need.
    """
    return math.ceil(sum(identifier_tokens(v) for v in values) / LEDGER_SHARE) + 1


def parse_ledger(summary: str) -> list[str]:
    """The identifiers a previous summary carried, in their order."""
    values: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line.strip() == LEDGER_HEADING
        elif inside and line.startswith("- "):
            values.append(line[2:])
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
