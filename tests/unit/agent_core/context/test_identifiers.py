from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core.context import identifiers
from agent_core.context.identifiers import (
    LEDGER_HEADING,
    IdentifierKind,
    Ledger,
    build_ledger,
    find_identifiers,
    identifier_set,
    identifier_tokens,
    ledger_budget_tokens,
    parse_ledger,
    recent_identifiers,
    without_ledger,
)


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


class TestLedger:
    def test_fits_budget_in_order(self):
        values = ["a_b", "c_d", "a_much_longer_name"]
        ledger = build_ledger(values, identifier_tokens("a_b") * 3)
        assert ledger.carried == ("a_b", "c_d")
        assert ledger.dropped == ("a_much_longer_name",)

    def test_stops_reading_when_full(self):
        def values() -> Iterator[str]:
            yield from ("a_b", "c_d")
            raise AssertionError("read past a full ledger")

        ledger = build_ledger(values(), identifier_tokens("a_b"))
        assert ledger.carried == ("a_b",)
        assert ledger.dropped == ()

    def test_skips_a_long_one_but_keeps_going(self):
        long = "https://example.com/" + "x" * 100
        ledger = build_ledger([long, "a_b"], identifier_tokens("a_b") + 1)
        assert ledger.carried == ("a_b",)
        assert ledger.dropped == (long,)

    def test_render_and_parse_round_trip(self):
        ledger = Ledger(("x_y", "https://e.com/a b"), ())
        summary = f"## Goal\nship\n\n{ledger.render()}\n## After\nmore"
        assert parse_ledger(summary) == ["x_y", "https://e.com/a b"]
        assert LEDGER_HEADING not in without_ledger(summary)
        assert "## After\nmore" in without_ledger(summary)
        assert "## Goal\nship" in without_ledger(summary)

    def test_empty_ledger_renders_nothing(self):
        assert Ledger((), ("x",)).render() == ""
        assert Ledger((), ()).tokens == 0

    def test_tokens_cover_each_line(self):
        ledger = Ledger(("a_b", "c_d"), ())
        assert ledger.tokens >= identifier_tokens("a_b") * 2

    def test_budget_share(self):
        assert ledger_budget_tokens(4_000) == 3_000


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
