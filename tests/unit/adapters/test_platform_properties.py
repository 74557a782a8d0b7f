"""Random Markdown replies through every platform: nothing lost, every message fits and is valid.

For each platform the reply is rendered whole and as messages. The text a reader sees in
the messages, together, must be the text of the whole (whitespace at the cuts aside),
grapheme cluster by grapheme cluster, so no cluster is cut; every message must fit the
limit as the platform counts it and be markup its client accepts; the plain-text fallback
must fit too and lose nothing either.
"""

from __future__ import annotations

import regex
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from adapters.discord.chunks import MESSAGE_LIMIT as DISCORD_LIMIT
from adapters.discord.chunks import render_chunks as discord_chunks
from adapters.discord.formatting import to_discord_markdown
from adapters.document import parse
from adapters.plaintext import PlainRenderer
from adapters.slack.chunks import MAX_MESSAGE_CHARS as SLACK_LIMIT
from adapters.slack.chunks import render_chunks as slack_chunks
from adapters.slack.mrkdwn import escape, to_mrkdwn
from adapters.telegram.chunks import MESSAGE_LIMIT as TELEGRAM_LIMIT
from adapters.telegram.chunks import render_chunks as telegram_chunks
from adapters.telegram.chunks import utf16_length
from adapters.telegram.formatting import markdown_to_html
from tests.fixtures.markup import read_mrkdwn
from tests.fixtures.platform_servers.telegram import parse_telegram_html

_GRAPHEME = regex.compile(r"\X")
_CLUSTERS = [
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # family (ZWJ)
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\U0001f1fa\U0001f1e6",  # flag
    "\U0001f44d\U0001f3fd",  # skin tone
    "e\u0301",  # combining accent
    "\u0915\u094d\u0937",  # Devanagari conjunct
    "🚀",
    "你",
]


def graphemes(text: str) -> list[str]:
    """The clusters a reader sees, leaving out whitespace (cuts may add or drop it)."""
    return [g for g in _GRAPHEME.findall(text) if g.strip()]


def shows_something(markdown: str) -> bool:
    """A reply that shows nothing is sent as its source instead (tested with each platform)."""
    return bool(parse(markdown))


def _unquoted(text: str) -> str:
    return regex.sub(r"(?m)^(?:> ?)+", "", text)


def same_text(pieces: list[str], whole: str, *, ignore: str = "") -> None:
    got = [g for piece in pieces for g in graphemes(piece) if g not in ignore]
    assert got == [g for g in graphemes(whole) if g not in ignore], (
        "text lost, added or a character cut in two"
    )


# Random replies ---------------------------------------------------------------------------

_letters = st.lists(
    st.sampled_from(list("abcdefghij xyzÄöжщ") + _CLUSTERS), min_size=1, max_size=10
).map("".join)
_hostile = st.text(alphabet=st.sampled_from(list("&<>\"'|*_~`#-+.!?[]()\\:/")), max_size=4)
_word = st.builds(lambda a, b: (a + b).strip() or "w", _letters, _hostile)
_run = st.lists(st.sampled_from([*_CLUSTERS, "a", "_", "*"]), min_size=50, max_size=400).map(
    "".join
)
_inline = st.one_of(
    _word,
    _word,
    _word.map(lambda w: f"**{w}**"),
    _word.map(lambda w: f"*{w}*"),
    _word.map(lambda w: f"_{w}_"),
    _word.map(lambda w: f"~~{w}~~"),
    _word.map(lambda w: f"`{w}`"),
    _word.map(lambda w: f"``a`{w}``"),
    _word.map(lambda w: f"[{w}](https://example.com/{len(w)}_x)"),
    _word.map(lambda w: f"[{w}](docs/{len(w)}.md)"),
    st.just("<https://example.com/auto>"),
    st.just("https://example.com/bare_url?a=1&b=2"),
    _word.map(lambda w: f"![{w}](https://example.com/i.png)"),
    _run,
)
_line = st.lists(_inline, min_size=1, max_size=12).map(" ".join)
_paragraph = st.lists(_line, min_size=1, max_size=4).map("\n".join)
_code_line = st.one_of(
    st.lists(st.sampled_from(list("abc xyz=()<>&'\"{}`~\t") + _CLUSTERS), max_size=60).map("".join),
    st.sampled_from(["```python", "```", "~~~", "````", "   ```js", "    indented"]),
    _run,
)
_fence = st.builds(
    lambda fence, indent, info, lines: (
        f"{' ' * indent}{fence}{info}\n" + "\n".join(lines) + f"\n{' ' * indent}{fence}"
    ),
    st.sampled_from(["```", "````", "~~~", "~~~~"]),
    st.integers(min_value=0, max_value=3),
    st.sampled_from(["", "python", "md", 'py"><b>']),
    st.lists(_code_line, max_size=60),
)
_list = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2), st.sampled_from(["- ", "1. ", "- [ ] "]), _line
    ),
    min_size=1,
    max_size=12,
).map(lambda items: "\n".join(f"{'   ' * depth}{marker}{text}" for depth, marker, text in items))
_quote = st.lists(st.tuples(st.sampled_from(["> ", ">> "]), _line), min_size=1, max_size=5).map(
    lambda lines: "\n".join(prefix + text for prefix, text in lines)
)
_cell = _word.map(lambda w: w.replace("|", "/"))
_table = st.integers(min_value=1, max_value=4).flatmap(
    lambda columns: st.lists(
        st.lists(_cell, min_size=columns, max_size=columns), min_size=1, max_size=8
    ).map(
        lambda rows: "\n".join(
            ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * columns]
            + ["| " + " | ".join(row) + " |" for row in rows[1:]]
        )
    )
)
_block = st.one_of(
    _paragraph,
    _paragraph,
    _line.map(lambda line: f"## {line}"),
    _line.map(lambda line: f"#### {line}"),
    _fence,
    _list,
    _quote,
    _table,
    st.just("---"),
)
_reply = st.builds(
    lambda blocks, separators, tail: (
        "".join(b + s for b, s in zip(blocks, separators, strict=False)) + tail
    ),
    st.lists(_block, min_size=1, max_size=14),
    st.lists(st.sampled_from(["\n\n", "\n\n", "\n"]), min_size=14, max_size=14),
    st.sampled_from(["", "\n\n```py\nunclosed = True\n" + "x = 1\n" * 30]),
)

SLACK_MARKERS = "*_~"
# No explain phase: on Python 3.11 it traces every line and can outlast the test timeout,
# hiding the failing example behind a timeout. Derandomized: the suite runs the same 150
# replies every time, so it cannot fail by chance; longer random searches (thousands of
# replies) are run by hand and what they find becomes an explicit example here.
_SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)


# Platforms --------------------------------------------------------------------------------


@_SETTINGS
@given(_reply, st.sampled_from([256, 700, TELEGRAM_LIMIT]))
def test_telegram(markdown: str, limit: int) -> None:
    if not shows_something(markdown):
        return
    whole, _ = parse_telegram_html(markdown_to_html(markdown))
    chunks = telegram_chunks(markdown, limit)
    shown = []
    for chunk in chunks:
        text, _ = parse_telegram_html(chunk.html)  # raises where Telegram would refuse it
        assert utf16_length(text) <= limit, "Telegram counts the text after entity parsing"
        assert utf16_length(chunk.plain) <= limit, "the plain fallback fits too"
        shown.append(text)
    same_text(shown, whole)
    # In plain text a quote is its "> " prefixes, which a cut repeats (see the test below);
    # a ">" of the text itself may start a message after a cut, so ">" is left out.
    plain = [chunk.plain for chunk in chunks]
    same_text(plain, PlainRenderer().document(parse(markdown)), ignore=">")


def test_telegram_quote_cut_across_messages_is_a_quote_in_each() -> None:
    markdown = "> " + " ".join(f"quoted{i}" for i in range(120)) + "\n> > inner words here"
    chunks = telegram_chunks(markdown, 256)
    assert len(chunks) > 2
    for chunk in chunks:
        assert all(line.startswith(">") for line in chunk.plain.split("\n"))
    same_text(
        [_unquoted(c.plain) for c in chunks], _unquoted(PlainRenderer().document(parse(markdown)))
    )


@_SETTINGS
@given(_reply, st.sampled_from([60, 300, SLACK_LIMIT]))
def test_slack(markdown: str, limit: int) -> None:
    if not shows_something(markdown):
        return
    whole = read_mrkdwn(to_mrkdwn(markdown))
    chunks = slack_chunks(markdown, limit)
    shown = []
    for chunk in chunks:
        assert len(chunk.mrkdwn) <= limit
        assert len(escape(chunk.plain)) <= limit, "the plain fallback fits too"
        shown.append(read_mrkdwn(chunk.mrkdwn))  # raises on open blocks, bare & or <
    # Slack has no escape for *, _ and ~: a literal one next to a cut may pair differently
    # with another in the whole reply, so those three are left out of the comparison.
    same_text(shown, whole, ignore=SLACK_MARKERS)


_DISCORD_MARKUP = regex.compile(r"(?m)^(?:> )?```.*$|[\\*_~`|\[\]()<>#\u200b-]")


def _discord_text(markdown: str) -> str:
    """Discord Markdown without fence lines and markup characters: the words that must arrive.

    (Discord's own parsing of hostile code spans is not modelled here; that a message's
    code blocks open and close, and that nothing else is lost or cut, is.)
    """
    return _DISCORD_MARKUP.sub("", markdown)


@_SETTINGS
@given(_reply, st.sampled_from([300, DISCORD_LIMIT]))
@example(r"\```a`b``", DISCORD_LIMIT)  # an escaped backtick against a code span's ``
def test_discord(markdown: str, limit: int) -> None:
    if not shows_something(markdown):
        return
    chunks = discord_chunks(markdown, limit)
    for chunk in chunks:
        assert len(chunk) <= limit, "Discord counts characters"
        assert chunk.count("```") % 2 == 0, "code blocks open and close in each message"
    same_text([_discord_text(c) for c in chunks], _discord_text(to_discord_markdown(markdown)))
