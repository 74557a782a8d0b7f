from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core.context import identifiers
from agent_core.context.identifiers import (
    LEDGER_HEADING,
    Candidate,
    IdentifierKind,
    Ledger,
    LedgerCosts,
    find_identifiers,
    identifier_set,
    ledger_budget_tokens,
    ledger_ceiling_tokens,
    ledger_line_allowed,
    ledger_room,
    parse_ledger,
    rank_ledger,
    recent_identifiers,
    without_ledger,
)
from agent_core.tokens import TokenCounter


class TestFindIdentifiers:
    @pytest.mark.parametrize(
        ("text", "kind", "value"),
        [
            ("see https://example.com/a?b=1). ok", IdentifierKind.URL, "https://example.com/a?b=1"),
            ("mail bob.smith@example.co.uk now", IdentifierKind.EMAIL, "bob.smith@example.co.uk"),
            (
                "id 123e4567-e89b-12d3-a456-426614174000",
                IdentifierKind.UUID,
                "123e4567-e89b-12d3-a456-426614174000",
            ),
            ("fixed in #123.", IdentifierKind.TICKET, "#123"),
            ("see ABC-42", IdentifierKind.TICKET, "ABC-42"),
            ("org/repo#7", IdentifierKind.TICKET, "org/repo#7"),
            ("edit /etc/X11/xorg.conf now", IdentifierKind.PATH, "/etc/X11/xorg.conf"),
            ("in ~/code/x", IdentifierKind.PATH, "~/code/x"),
            ("run ./run.sh", IdentifierKind.PATH, "./run.sh"),
            ("open src/app/main.py,", IdentifierKind.PATH, "src/app/main.py"),
            ("look in /usr/share/applications.", IdentifierKind.PATH, "/usr/share/applications"),
            ("C:\\Users\\bob\\file.txt", IdentifierKind.PATH, "C:\\Users\\bob\\file.txt"),
            ("commit 3f2a9c1d", IdentifierKind.HASH, "3f2a9c1d"),
            ("upgrade to 8.04", IdentifierKind.VERSION, "8.04"),
            ("kernel 2.6.24-16-generic", IdentifierKind.VERSION, "2.6.24-16-generic"),
            ("tag v1.2.3", IdentifierKind.VERSION, "v1.2.3"),
            ("run `npm test` now", IdentifierKind.CODE, "npm test"),
            ("call os.path.join", IdentifierKind.CODE, "os.path.join"),
            ("use parse_ledger", IdentifierKind.CODE, "parse_ledger"),
            ("class TokenCounter", IdentifierKind.CODE, "TokenCounter"),
            ("getElementById()", IdentifierKind.CODE, "getElementById"),
        ],
    )
    def test_kinds(self, text, kind, value):
        assert (kind, value) in find_identifiers(text)

    @pytest.mark.parametrize(
        "text",
        [
            "just a plain sentence, Nothing Here.",
            "e.g. this and i.e. that",
            "/join #ubuntu",
            "deadbeef",  # hex-looking word without digits
            "1234567 42",
            "",
            "mY iTS inSANE pleasE THe WHat",  # shouting and typos in chat
        ],
    )
    def test_noise_is_not_an_identifier(self, text):
        assert find_identifiers(text) == []

    @pytest.mark.parametrize(
        "value", ["getHTTPResponse", "XMLHttpRequest", "NetworkManager", "fooBar", "ThinkWiki"]
    )
    def test_camel_case_code_names(self, value):
        assert find_identifiers(f"try {value} now") == [(IdentifierKind.CODE, value)]

    def test_url_is_not_split_into_parts(self):
        found = find_identifiers("http://archive.ubuntu.com/ubuntu/pool/main.py")
        assert found == [(IdentifierKind.URL, "http://archive.ubuntu.com/ubuntu/pool/main.py")]

    def test_overlong_values_are_left_out(self):
        assert find_identifiers("https://x.example/" + "a" * 300) == []


class TestRecentIdentifiers:
    def test_most_recent_first_and_deduplicated(self):
        texts = ["first /etc/a/b and 1.0", "then 2.0", "again /etc/a/b"]
        assert list(recent_identifiers(texts)) == ["/etc/a/b", "2.0", "1.0"]

    def test_reads_only_as_far_as_asked(self):
        texts = ["old 1.0", "new 2.0"]
        found = recent_identifiers(texts)
        assert next(found) == "2.0"
        texts[0] = "changed 3.0"  # not read yet
        assert list(found) == ["3.0"]

    def test_identifier_set(self):
        assert identifier_set(["a 1.0", "b_c"]) == {"1.0", "b_c"}


COSTS = LedgerCosts(TokenCounter("cl100k_base"))
TX = "0x" + "9f3a" * 16
URL = "https://etherscan.io/tx/" + TX
OLD_NOTE = (
    "(verbatim from the compacted turns, most recent first; older or unlisted ones are in "
    "this chat's archive: find them with session_search)"
)


def _candidates(*values: str) -> list[Candidate]:
    return [Candidate(v, i, COSTS.line(v)) for i, v in enumerate(values)]


def _hashes(count: int) -> list[str]:
    return [f"0x{k:064x}" for k in range(count)]


class TestLedger:
    def test_everything_that_fits_is_carried_in_order(self):
        ledger = rank_ledger(_candidates("a_b", "c_d", "a_much_longer_name"), 10_000, COSTS)
        assert ledger.carried == ("a_b", "c_d", "a_much_longer_name")
        assert ledger.dropped == ()

    def test_lines_are_the_bare_identifiers(self):
        lines = Ledger((URL, TX, "abc1234"), ()).render().splitlines()
        assert lines[0] == LEDGER_HEADING
        assert "session_search" in lines[1]
        assert lines[2:] == [URL, TX, "abc1234"]  # no bullet, quote or repeated context

    def test_size_is_counted_in_the_main_models_tokens(self):
        ledger = rank_ledger(_candidates(TX, "0x" + "7e1c" * 16, "5b2d" * 10), 10_000, COSTS)
        exact = TokenCounter("cl100k_base").count_text(ledger.render())
        assert exact <= ledger.tokens <= exact + 4  # never under, a newline or two over
        # Hex runs near 1.7 characters a token: the old 3-per-token estimate undercounted.
        assert COSTS.line(TX) > len(TX) // 3 + 2

    def test_what_does_not_fit_is_dropped_and_the_room_holds(self):
        values = _hashes(200)
        ledger = rank_ledger(_candidates(*values), 2_000, COSTS)
        assert ledger.dropped
        assert ledger.carried == tuple(values[: len(ledger.carried)])  # the most recent
        assert ledger.tokens <= 2_000
        assert TokenCounter("cl100k_base").count_text(ledger.render()) <= 2_000

    def test_asked_then_repeated_then_recent_when_not_all_fit(self):
        values = _hashes(100)
        candidates = _candidates(*values)
        candidates[-1] = replace(candidates[-1], asked=True)
        candidates[-2] = replace(candidates[-2], mentions=3)
        ledger = rank_ledger(candidates, 600, COSTS)
        assert ledger.carried[-2:] == (values[-2], values[-1])  # carried in recency order
        assert ledger.carried[0] == values[0]
        assert values[50] in ledger.dropped

    def test_nothing_to_carry_renders_nothing(self):
        assert rank_ledger([], 1_000, COSTS).render() == ""
        assert rank_ledger([], 1_000, COSTS).tokens == 0
        assert rank_ledger(_candidates("a_b"), COSTS.frame, COSTS).carried == ()

    def test_render_and_parse_round_trip(self):
        values = ("x_y", "https://e.com/a", "`a b`", "#123")
        summary = f"## Goal\nship\n\n{Ledger(values, ()).render()}\n## After\nmore"
        assert parse_ledger(summary) == list(values)
        assert LEDGER_HEADING not in without_ledger(summary)
        assert "## After\nmore" in without_ledger(summary)
        assert "## Goal\nship" in without_ledger(summary)

    def test_a_ledger_written_with_bullets_still_reads(self):
        old = f"## Goal\nx\n\n{LEDGER_HEADING}\n{OLD_NOTE}\n- {TX}\n- x_y\n## After"
        assert parse_ledger(old) == [TX, "x_y"]

    @pytest.mark.parametrize("value", ["## Goal", "- x_y", "(a_b)"])
    def test_values_that_would_read_back_otherwise_are_not_lines(self, value):
        assert not ledger_line_allowed(value)

    @pytest.mark.parametrize("value", ["#123", TX, "a:b", "`x y`"])
    def test_ordinary_values_are_lines(self, value):
        assert ledger_line_allowed(value)
        assert parse_ledger(Ledger((value,), ()).render()) == [value]

    def test_the_ceiling_is_12_percent_of_the_window_up_to_16k(self):
        assert ledger_ceiling_tokens(128_000) == 15_360
        assert ledger_ceiling_tokens(1_000_000) == 16_000
        assert ledger_ceiling_tokens(32_000) == 3_840

    def test_small_windows_keep_the_share_of_the_summary_budget(self):
        assert ledger_budget_tokens(4_000) == 3_000
        assert ledger_room(2_000, 8_000) == 1_500
        assert ledger_room(6_400, 128_000) == 15_360


def _reference(text: str) -> list[tuple[IdentifierKind, str]]:
    """find_identifiers without its shortcuts: every alternative over every word but plain ones."""
    full, names = identifiers._pattern((True,) * len(identifiers._GATED))
    found = [
        (IdentifierKind.CODE, v)
        for v in (m[1].strip() for m in re.findall(r"(`([^`\n]{1,200})`)", text))
        if 2 <= len(v) <= identifiers.MAX_IDENTIFIER_CHARS
    ]
    text = re.sub(r"`[^`\n]{1,200}`", " ", text)
    words = " ".join(w for w in text.split() if not identifiers._plain_word(w))
    for match in full.finditer(words.encode("utf-8", "replace")):
        group = names[match.lastindex]
        value = identifiers._clean(group, match.group(match.lastindex).decode())
        if value is not None:
            found.append((identifiers._KIND_OF_GROUP[group], value))
    return found


_CHAT_ALPHABET = "aZf0 9._-/\\#@:~`'\",()!?wW\n"
_CHAT_WORDS = [
    "http://x.org/a",
    "www.ubuntu.com",
    "bob@example.com",
    "/etc/fstab",
    "~/x",
    "C:\\a\\b.txt",
    "#12",
    "ABC-3",
    "org/repo#9",
    "deadbeef-dead-beef-dead-beefdeadbeef",
    "3f2a9c1d",
    "2.6.24-16",
    "os.path",
    "snake_case",
    "CamelCase",
    "don't",
    "I'm",
    "nick:",
]


class TestShortcutsChangeNothing:
    """The pre-check, the word filter and the gated patterns only skip work."""

    @settings(max_examples=400, deadline=None)
    @given(st.text(alphabet=_CHAT_ALPHABET, max_size=80))
    def test_any_text(self, text):
        assert find_identifiers(text) == _reference(text)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(_CHAT_WORDS) | st.text(_CHAT_ALPHABET, max_size=12)))
    def test_chat_like_text(self, words):
        text = " ".join(words)
        assert find_identifiers(text) == _reference(text)


REAL_WORLD = [
    # (kind, identifier): shapes from IRC, Discord and Slack logs of other communities.
    (IdentifierKind.PATH, "build/x.tar.gz"),
    (IdentifierKind.PATH, "var/log/Xorg.0.log"),
    (IdentifierKind.PATH, "/var/log/Xorg.0.log"),
    (IdentifierKind.PATH, "~/.config/nvim/init.lua"),
    (IdentifierKind.PATH, "./configure"),
    (IdentifierKind.PATH, "src/lib/foo.d.ts"),
    (IdentifierKind.PATH, "/etc/apt/sources.list.d/ppa.list"),
    (IdentifierKind.PATH, "C:\\Users\\bob\\x.txt"),
    (IdentifierKind.VERSION, "1.4.0+a1b2c3d4e"),
    (IdentifierKind.VERSION, "2.0.0-rc.1+build.5"),
    (IdentifierKind.VERSION, "v0.18.3"),
    (IdentifierKind.VERSION, "2.6.24-16-generic"),
    (IdentifierKind.HASH, "0x7ffd3a2c"),
    (IdentifierKind.HASH, "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060"),
    (IdentifierKind.HASH, "5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060"),
    (IdentifierKind.HASH, "3f2a9c1d"),
    (IdentifierKind.CODE, "clojure.core/split-with"),
    (IdentifierKind.CODE, "clojure.string/join"),
    (IdentifierKind.CODE, "macOS"),
    (IdentifierKind.CODE, "watchOS"),
    (IdentifierKind.CODE, "Foo::Bar::baz"),
    (IdentifierKind.CODE, "os.path.join"),
    (IdentifierKind.CODE, "get_block_number"),
    (IdentifierKind.CODE, "XMLHttpRequest"),
    (IdentifierKind.URL, "https://github.com/org/repo/pull/1234#issuecomment-99"),
    (
        IdentifierKind.URL,
        "https://etherscan.io/tx/0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
    ),
    (IdentifierKind.EMAIL, "dev+ci@lists.example.org"),
    (IdentifierKind.UUID, "123e4567-e89b-12d3-a456-426614174000"),
    (IdentifierKind.TICKET, "PROJ-4711"),
    (IdentifierKind.TICKET, "rust-lang/rust#12345"),
    (IdentifierKind.TICKET, "#4711"),
]


@pytest.mark.parametrize(("kind", "value"), REAL_WORLD, ids=[v for _, v in REAL_WORLD])
@pytest.mark.parametrize("template", ["{}", "see {} now", "({})", "try {}.", "`x` {}, ok"])
def test_real_world_identifiers_come_out_whole(kind, value, template):
    """Item 21b: each identifier comes out as the same string, whatever surrounds it."""
    assert (kind, value) in find_identifiers(template.format(value))


CRAFTED: dict[str, Callable[[int], str]] = {
    "slashes": lambda n: ("a/" * n)[:n],
    "dots": lambda n: ("x/" + "a." * n)[:n],
    "dashes": lambda n: ("a-" * n)[:n],
    "digits_dashes": lambda n: ("1-" * n)[:n],
    "upper_dashes": lambda n: ("A-" * n)[:n],
    "sk": lambda n: ("sk-" * n)[:n],
    "hex_runs": lambda n: ("0a" * n)[:n],
    "camel_humps": lambda n: ("aB" * n)[:n],
    "underscores": lambda n: ("a_" * n)[:n],
    "backticks": lambda n: ("`a" * n)[:n],
    "at_signs": lambda n: ("a@a." * n)[:n],
    "tildes": lambda n: ("~/" * n)[:n],
}


def _cpu_seconds(text: str, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        find_identifiers(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_extraction_is_linear_on_crafted_text(name):
    """Item 15: sixteen times the text costs about sixteen times the CPU (best of three,
    same process, so machine load slows both sizes alike), far from the 256 times a
    quadratic search costs. The old extractor took 0.75 s on 6 kB of "a/a/a/…"."""
    make = CRAFTED[name]
    small, large = _cpu_seconds(make(6_000)), _cpu_seconds(make(96_000))
    assert large <= 48 * max(small, 1e-4), (name, small, large)
