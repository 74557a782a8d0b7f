"""The secret rules the redactor applies: gitleaks' rule set plus a few for chat text.

gitleaks (``rules/gitleaks.toml``, MIT) is a well-kept scanner with some two hundred rules
for provider keys and tokens, each with the keywords that must appear for it to match, an
entropy floor and allowlists against placeholders. Its rules are written for code and
configuration files; people in a chat also write ``my password is …``, paste a bare bot
token or an ``Authorization`` header, or quote JSON inside JSON. :data:`CHAT_RULES` covers
those, in the same form.

Every expression is compiled with RE2, which matches in time linear in the text: no input,
however crafted, makes a search backtrack.
"""

from __future__ import annotations

import math
import tomllib
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

import re2

RULES_FILE = Path(__file__).with_name("rules") / "gitleaks.toml"
LINE_CONTEXT_CHARS = 500
"""How much of a finding's line an allowlist aimed at the line reads, each side."""
RE2_MAX_MEM = 64 << 20
"""RE2's memory budget per expression (its default, 8 MiB, is too small for the largest
gitleaks rules to stay on the fast DFA path)."""


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Findings a rule must not report: placeholders, known examples, code idioms."""

    regexes: tuple[Any, ...]
    """Compiled RE2 expressions; one matching the target allows the finding."""
    target: str
    """What the expressions look at: ``secret`` (default), ``match`` or ``line``."""
    stopwords: Any | None
    """One RE2 alternation of the lower-case stop words; a secret containing one is allowed."""
    all_of: bool
    """gitleaks' ``condition = "AND"``: every check must allow the finding."""


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One kind of secret."""

    id: str
    pattern: Any
    """The compiled RE2 expression."""
    keywords: tuple[str, ...]
    """Lower-case substrings a text must hold for the rule to be tried (empty: always)."""
    entropy: float = 0.0
    """The secret's Shannon entropy must exceed this (0: no floor)."""
    secret_group: int = 0
    """The group holding the secret (0: the first non-empty group, else the whole match)."""
    allowlists: tuple[Allowlist, ...] = ()


@dataclass(frozen=True, slots=True)
class Finding:
    """Where one secret lies in a text."""

    rule: str
    start: int
    end: int


def _compile(expression: str) -> Any:
    """An RE2 expression over UTF-8 bytes.

    The binding's ``str`` path re-encodes the text and converts offsets on every match,
    several times the cost of the match itself.
    """
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False
    return re2.compile(expression.encode(), options)


def _alternation(words: Sequence[str | bytes]) -> Any | None:
    """One expression matching any of ``words``, the longest first where several start."""
    texts = {w.decode() if isinstance(w, bytes) else w for w in words}
    if not texts:
        return None
    return _compile("|".join(re2.escape(w) for w in sorted(texts, key=len, reverse=True)))


def _allowlist(data: dict[str, Any]) -> Allowlist | None:
    """An allowlist as gitleaks reads it, or ``None`` when it can never apply to chat text."""
    all_of = str(data.get("condition", "OR")).upper() == "AND"
    if data.get("paths") and all_of:
        return None  # needs a file path to match: chat text has none
    regexes = tuple(_compile(r) for r in data.get("regexes", ()))
    stopwords = _alternation([str(w).lower() for w in data.get("stopwords", ())])
    if not regexes and stopwords is None:
        return None
    return Allowlist(regexes, str(data.get("regexTarget") or "secret"), stopwords, all_of)


def _gitleaks_rules(config: dict[str, Any]) -> list[SecretRule]:
    """The rules of the gitleaks config, each with its own and the global allowlists."""
    global_lists = (config.get("allowlist"), *config.get("allowlists", ()))
    shared = tuple(a for a in map(_allowlist, filter(None, global_lists)) if a)
    rules = []
    for data in config["rules"]:
        if "regex" not in data or data.get("path"):
            continue  # file-name rules, or rules for one kind of file
        own = tuple(a for a in map(_allowlist, data.get("allowlists", ())) if a)
        allowlists = own + shared
        rules.append(
            SecretRule(
                id=str(data["id"]),
                pattern=_compile(str(data["regex"])),
                keywords=tuple(str(k).lower() for k in data.get("keywords", ())),
                entropy=float(data.get("entropy", 0.0)),
                secret_group=int(data.get("secretGroup", 0)),
                allowlists=allowlists,
            )
        )
    return rules


_KEY_NAMES = (
    r"(?:[a-z0-9]+[_-])*(?:api[_-]?key|access[_-]?key|secret[_-]?key|client[_-]?secret|"
    r"auth[_-]?token|access[_-]?token|refresh[_-]?token|bot[_-]?token|token|secret|"
    r"password|passwd|pwd)"
)
CHAT_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # name = value, also with escaped quotes (JSON inside a JSON tool argument) and values
    # shorter than gitleaks' generic rule wants; the name stays so the summary says a key
    # was set.
    (
        "hubbub-assignment",
        ("key", "token", "secret", "pass", "pwd"),
        rf"(?i)\b{_KEY_NAMES}\b(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?"
        r"([^\s\\\"',;)}\]]{4,})",
    ),
    # "my password is hunter2", "the passphrase was: …". An unquoted value that is one
    # plain lower-case word ("the password is wrong") is prose, not a password.
    (
        "hubbub-password-phrase",
        ("pass", "pwd", "pw ", "pin "),
        r"(?i:\b(?:pass(?:word|phrase|code)?|passwd|pwd|pw|pin)"
        r"(?:[ \t]+(?:is|was|now)|[ \t]*[:=])+)"
        r"[ \t]*(?:[\"'`]([^\"'`\n]{3,80})[\"'`]|([^\s\"'`]*[^a-z\s\"'`.,;:!?)][^\s\"'`]*))",
    ),
    # Authorization / Proxy-Authorization headers of any scheme, not only in curl commands.
    (
        "hubbub-authorization-header",
        ("authorization",),
        r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:basic|bearer|token|digest|"
        r"negotiate|apikey)[ \t]+)?([A-Za-z0-9._~+/=-]{8,})",
    ),
    ("hubbub-bearer", ("bearer",), r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"),
    # A PEM private key, also one cut off before its END line. The body (base64 and the
    # "Proc-Type: 4,ENCRYPTED" headers) never holds "--", so it stops at the END line or
    # the next BEGIN without searching ahead.
    (
        "hubbub-private-key",
        ("private key",),
        r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:[A-Za-z0-9+/=\s:,.]|-[^-])*"
        r"(?:-----END [A-Z ]{0,40}PRIVATE KEY-----)?",
    ),
    # The credentials of the platforms Hubbub itself talks to, in every shape they are
    # pasted (gitleaks wants the full, current formats only).
    ("hubbub-llm-key", ("sk-",), r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    ("hubbub-slack-token", ("xox", "xapp-"), r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}"),
    ("hubbub-telegram-token", (":aa",), r"\b\d{8,10}:AA[A-Za-z0-9_-]{30,}"),
    # user:password@ in URLs
    ("hubbub-url-credentials", ("://",), r"://([^/\s:@]{1,64}:[^/\s@]{1,128})@"),
)
"""Hubbub's additions: ``(id, keywords, expression)``; the secret is group 1 when there is
one, else the whole match. gitleaks' allowlists (placeholders in code) do not apply to them:
in a chat, a pasted credential is never an example."""


@dataclass(frozen=True, slots=True)
class RuleSet:
    """All rules, with the keyword index that picks the ones worth trying on a text."""

    rules: tuple[SecretRule, ...]
    keywords: Any
    """One RE2 alternation of every rule's keywords, longest first."""
    rules_by_keyword: dict[bytes, tuple[int, ...]]
    """Keyword (UTF-8) -> indices of the rules that need it."""
    overlapping: dict[bytes, tuple[bytes, ...]]
    """Keyword -> the other keywords an occurrence of it can overlap in a text."""
    unconditional: tuple[int, ...]
    """Rules without keywords: tried on every text."""

    def candidates(self, lowered: Sequence[bytes]) -> list[list[int]]:
        """For each lower-cased UTF-8 text: the indices of the rules whose keywords it holds.

        The texts are searched as one (a keyword never holds the NUL that joins them), so
        a batch of short chat messages costs one search. That pass finds keyword
        occurrences that do not overlap; a keyword it skipped overlaps one it found ("key"
        inside "apikey", "ey" across "key"), so only those neighbours are checked again,
        each with one substring search: linear in the text.
        """
        starts = list(accumulate((len(t) + 1 for t in lowered[:-1]), initial=0))
        found: list[set[bytes]] = [set() for _ in lowered]
        for match in self.keywords.finditer(b"\x00".join(lowered)):
            found[bisect_right(starts, match.start()) - 1].add(match.group())
        out: list[list[int]] = []
        for text, words in zip(lowered, found, strict=True):
            if not words:
                out.append(list(self.unconditional))
                continue
            unseen = {n for word in words for n in self.overlapping[word]} - words
            words.update(word for word in unseen if word in text)
            chosen = set(self.unconditional)
            for word in words:
                chosen.update(self.rules_by_keyword[word])
            out.append(sorted(chosen))
        return out


def _overlapping(words: Sequence[bytes]) -> dict[bytes, tuple[bytes, ...]]:
    """For each word, the others whose occurrences can share characters with it."""
    prefixes = {w: {w[:k] for k in range(1, len(w))} for w in words}
    suffixes = {w: {w[-k:] for k in range(1, len(w))} for w in words}
    return {
        a: tuple(
            b
            for b in words
            if b != a
            and (
                a in b
                or b in a
                or not suffixes[a].isdisjoint(prefixes[b])
                or not suffixes[b].isdisjoint(prefixes[a])
            )
        )
        for a in words
    }


def _rule_set(rules: Sequence[SecretRule]) -> RuleSet:
    words = sorted({k.encode() for rule in rules for k in rule.keywords})
    by_keyword: dict[bytes, list[int]] = {w: [] for w in words}
    for index, rule in enumerate(rules):
        for keyword in rule.keywords:
            by_keyword[keyword.encode()].append(index)
    return RuleSet(
        rules=tuple(rules),
        keywords=_alternation(words),
        rules_by_keyword={w: tuple(i) for w, i in by_keyword.items()},
        overlapping=_overlapping(words),
        unconditional=tuple(i for i, rule in enumerate(rules) if not rule.keywords),
    )


@cache
def rule_set() -> RuleSet:
    """Hubbub's rules then gitleaks', compiled once per process."""
    with RULES_FILE.open("rb") as handle:
        config = tomllib.load(handle)
    chat = [
        SecretRule(rule_id, _compile(expression), keywords)
        for rule_id, keywords, expression in CHAT_RULES
    ]
    return _rule_set([*chat, *_gitleaks_rules(config)])


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``, as gitleaks computes it."""
    if not text:
        return 0.0
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


def _line_of(text: bytes, start: int, end: int) -> bytes:
    """The line around ``text[start:end]``, at most :data:`LINE_CONTEXT_CHARS` each side.

    Bounded, so that many findings on one long line cost linear time.
    """
    low, high = max(0, start - LINE_CONTEXT_CHARS), end + LINE_CONTEXT_CHARS
    first = text.rfind(b"\n", low, start) + 1 or low
    last = text.find(b"\n", end, high)
    return text[first : last if last != -1 else min(high, len(text))]


def _allowed(allowlist: Allowlist, secret: bytes, text: bytes, span: tuple[int, int]) -> bool:
    """Whether ``allowlist`` allows the finding ``secret`` of the match at ``span``."""
    if allowlist.target == "match":
        target = text[span[0] : span[1]]
    elif allowlist.target == "line":
        target = _line_of(text, *span)
    else:
        target = secret
    by_regex = any(r.search(target) is not None for r in allowlist.regexes)
    by_word = allowlist.stopwords is not None and (
        allowlist.stopwords.search(secret.lower()) is not None
    )
    if allowlist.all_of:
        checks = [by_regex] if allowlist.regexes else []
        checks += [by_word] if allowlist.stopwords is not None else []
        return all(checks)
    return by_regex or by_word


def _secret_span(rule: SecretRule, match: Any) -> tuple[int, int]:
    groups = rule.pattern.groups
    if rule.secret_group and rule.secret_group <= groups:
        span: tuple[int, int] = match.span(rule.secret_group)
        return span
    for group in range(1, groups + 1):
        start, end = match.span(group)
        if end > start:
            return start, end
    whole: tuple[int, int] = match.span()
    return whole


def find_secrets(texts: Sequence[str]) -> list[list[Finding]]:
    """Every secret the rules find in each of ``texts`` (overlapping findings included)."""
    rules = rule_set()
    lowered = [text.lower().encode("utf-8", "replace") for text in texts]
    out: list[list[Finding]] = []
    for text, indices in zip(texts, rules.candidates(lowered), strict=True):
        if not indices:
            out.append([])
            continue
        data = _utf8(text)
        spans = [span for index in indices for span in _spans(rules.rules[index], data)]
        if spans and not text.isascii():
            spans = _char_spans(data, spans)
        out.append([Finding(rule, start, end) for rule, start, end in spans])
    return out


def _utf8(text: str) -> bytes:
    """``text`` as RE2 reads it.

    UTF-8 cannot carry a lone surrogate: U+FFFD (one code point too) takes its place, so
    every character offset stays the same.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text).encode()


def _spans(rule: SecretRule, data: bytes) -> Iterator[tuple[str, int, int]]:
    """Byte spans of the secrets ``rule`` finds in ``data``."""
    for match in rule.pattern.finditer(data):
        start, end = _secret_span(rule, match)
        if end <= start:
            continue
        secret = data[start:end]
        if rule.entropy and shannon_entropy(secret.decode("utf-8", "replace")) <= rule.entropy:
            continue
        if any(_allowed(a, secret, data, match.span()) for a in rule.allowlists):
            continue
        yield rule.id, start, end


def _char_spans(data: bytes, spans: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Byte spans as character spans, converted in one pass over ``data``."""
    offsets = sorted({o for _, start, end in spans for o in (start, end)})
    chars: dict[int, int] = {}
    position = count = 0
    for offset in offsets:
        count += len(data[position:offset].decode("utf-8", "replace"))
        chars[offset] = count
        position = offset
    return [(rule, chars[start], chars[end]) for rule, start, end in spans]
