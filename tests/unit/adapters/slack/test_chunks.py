from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.slack.chunks import MAX_MESSAGE_CHARS, render_chunks
from adapters.slack.mrkdwn import WORD_JOINER

_ENTITY_ESCAPE = re.compile(r"&(?!amp;|lt;|gt;)")
_LINK = re.compile(r"<(?:https?|mailto):[^<>|\s]+(?:\|[^<>]*)?>")


def _balanced(mrkdwn: str) -> bool:
    """Code fences pair up; every ``<`` opens a well-formed link; no bare ``&``."""
    if mrkdwn.count("```") % 2:
        return False
    if _ENTITY_ESCAPE.search(mrkdwn):
        return False
    without_links = _LINK.sub("", mrkdwn)
    return "<" not in without_links and ">" not in re.sub(r"^>", "", without_links, flags=re.M)


def _words(text: str) -> list[str]:
    """The words a reader sees, without markup, escapes or separators."""
    text = text.replace(WORD_JOINER, "")
    text = re.sub(r"<(?:https?|mailto):[^|>]+\|([^>]*)>", r"\1", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.findall(r"[^\s*_~`\[\]()#>•|-]+", text)


_WORD = st.text(
    alphabet=st.characters(
        categories=("Ll", "Lu", "Lo", "Nd"),
        include_characters="&<>.,!?",
        exclude_characters="\u200b",
    ),
    min_size=1,
    max_size=12,
)
_INLINE = st.one_of(
    _WORD,
    _WORD.map(lambda w: f"**{w}**"),
    _WORD.map(lambda w: f"*{w}*"),
    _WORD.map(lambda w: f"~~{w}~~"),
    _WORD.map(lambda w: f"`{w}`"),
    _WORD.map(lambda w: f"[{w}](https://example.com/{len(w)})"),
)
_PARAGRAPH = st.lists(_INLINE, min_size=1, max_size=40).map(" ".join)
_CODE = st.lists(_WORD, min_size=1, max_size=30).map(lambda ws: "```py\n" + "\n".join(ws) + "\n```")
_DOCUMENT = st.lists(st.one_of(_PARAGRAPH, _PARAGRAPH, _CODE), min_size=1, max_size=12).map(
    "\n\n".join
)


class TestRenderChunks:
    def test_short_reply_is_one_message(self) -> None:
        (chunk,) = render_chunks("Hello **there**")
        assert chunk.mrkdwn == "Hello *there*"
        assert chunk.plain == "Hello there"

    def test_default_limit_stays_under_slacks_advice(self) -> None:
        assert MAX_MESSAGE_CHARS < 4_000
        chunks = render_chunks(("A sentence that goes on. " * 40 + "\n\n") * 12)
        assert len(chunks) > 1
        assert all(len(c.mrkdwn) <= MAX_MESSAGE_CHARS for c in chunks)

    def test_blank_reply_has_no_chunks(self) -> None:
        assert render_chunks("  \n\n ") == []

    def test_escaping_growth_is_split_again(self) -> None:
        markdown = " ".join(["a&b<c>d"] * 200)
        chunks = render_chunks(markdown, 300)
        assert all(len(c.mrkdwn) <= 300 for c in chunks)
        assert len(markdown) // 300 < len(chunks)
        assert " ".join(c.plain for c in chunks).split() == markdown.split()

    def test_long_code_block_becomes_several_well_formed_ones(self) -> None:
        code = "\n".join(f"value_{i} = compute({i}) < limit & ok" for i in range(80))
        chunks = render_chunks(f"Here you go:\n\n```python\n{code}\n```\n\nThat's all.", 400)
        code_chunks = [c.mrkdwn for c in chunks if "value_" in c.mrkdwn]
        assert len(code_chunks) > 1
        assert all(c.count("```") == 2 and len(c) <= 400 for c in code_chunks)
        lines = [ln for c in code_chunks for ln in c.split("\n") if ln.startswith("value_")]
        assert [ln.replace("&lt;", "<").replace("&amp;", "&") for ln in lines] == code.split("\n")

    def test_emoji_sequences_are_never_cut(self) -> None:
        family = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
        for cluster in (family, "\U0001f1fa\U0001f1e6", "\U0001f44d\U0001f3fd"):
            chunks = render_chunks(f"**{cluster * 50}**", 60)
            assert len(chunks) > 1
            for chunk in chunks:
                assert len(chunk.mrkdwn) <= 60
                assert re.fullmatch(f"\\*(?:{re.escape(cluster)})+\\*", chunk.mrkdwn)

    def test_code_in_a_quote_too_small_for_its_nesting_keeps_its_backticks(self) -> None:
        # A quoted table (a code block in Slack) cannot keep its quote at the smallest
        # limit; flattened, it must stay preformatted rather than become prose whose
        # backticks the renderer has to replace with look-alikes.
        reply = "> | a | b |\n> |---|---|\n> | `x` | y`z |\n" * 3
        chunks = render_chunks(reply, 16)
        shown = "".join(c.mrkdwn for c in chunks)
        assert "\u02cb" not in shown
        assert shown.count("`") - shown.count("```") * 3 == 3  # each table's `y`z` cell
        assert all(len(c.mrkdwn) <= 16 and _balanced(c.mrkdwn) for c in chunks)

    def test_limit_too_small(self) -> None:
        with pytest.raises(ValueError, match="at least 16"):
            render_chunks("hello", 10)

    @given(document=_DOCUMENT, limit=st.integers(min_value=60, max_value=600))
    def test_every_chunk_fits_is_balanced_and_nothing_is_lost(
        self, document: str, limit: int
    ) -> None:
        chunks = render_chunks(document, limit)
        assert chunks
        for chunk in chunks:
            assert len(chunk.mrkdwn) <= limit
            assert _balanced(chunk.mrkdwn), chunk.mrkdwn
        rendered = [w for c in chunks for w in _words(c.mrkdwn)]
        source = re.sub(r"```\w+", "```", document)  # Slack shows no language tag
        source = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", source)  # a link reads as its label
        assert "".join(rendered) == "".join(_words(source))
