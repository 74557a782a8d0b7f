"""Splitting replies into Telegram messages: every chunk fits, stays valid, loses nothing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.telegram.chunks import MESSAGE_LIMIT, render_chunks, utf16_length
from adapters.telegram.formatting import markdown_to_html
from tests.fixtures.platform_servers.telegram import parse_telegram_html

_WORDS = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Letters and digits in order: what a reader must see, whatever the markup."""
    return _WORDS.findall(text)


def check(markdown: str, limit: int = MESSAGE_LIMIT) -> list[tuple[str, str]]:
    """Render, assert every invariant, and return each chunk's ``(html, visible text)``."""
    chunks = render_chunks(markdown, limit)
    out = []
    for chunk in chunks:
        text, _ = parse_telegram_html(chunk.html)  # raises on unbalanced or unknown tags
        assert utf16_length(text) <= limit, "Telegram counts the text after entity parsing"
        assert utf16_length(chunk.plain) <= limit
        assert text.strip(), "no empty messages"
        out.append((chunk.html, text))
    whole, _ = parse_telegram_html(markdown_to_html(markdown))
    assert words("".join(text + " " for _, text in out)) == words(whole), "nothing lost"
    return out


class TestShortReplies:
    def test_one_chunk(self) -> None:
        (chunk,) = render_chunks("Hello **there**, see [docs](https://e.com)")
        assert chunk.html == 'Hello <b>there</b>, see <a href="https://e.com">docs</a>'
        assert chunk.plain == "Hello there, see docs (https://e.com)"

    def test_blank_reply_sends_nothing(self) -> None:
        assert render_chunks("  \n\n ") == []

    def test_markdown_that_renders_empty_keeps_its_source(self) -> None:
        (chunk,) = render_chunks("[ref]: https://e.com")
        assert chunk.html == ""
        assert chunk.plain == "[ref]: https://e.com"

    def test_limit_must_leave_room_for_markup(self) -> None:
        with pytest.raises(ValueError, match="at least 256"):
            render_chunks("x", 100)


class TestLongReplies:
    def test_paragraphs_split_under_4096(self) -> None:
        paragraph = "The quick brown fox jumps over the lazy dog. " * 20
        chunks = check("\n\n".join([paragraph.strip()] * 12))
        assert len(chunks) == 3
        assert all(not html.startswith(" ") for html, _ in chunks)

    def test_long_code_block_becomes_several_well_formed_blocks(self) -> None:
        code = "\n".join(
            f"    total += values[{i}] if values[{i}] < limit else 0" for i in range(300)
        )
        chunks = check(f"Here is the loop:\n\n```python\n{code}\n```\n\nThat is all.")
        assert len(chunks) >= 4
        blocks = [html for html, _ in chunks if "<pre>" in html]
        assert len(blocks) >= 3
        for html in blocks:
            assert html.count('<pre><code class="language-python">') == 1
            assert html.count("</code></pre>") == 1

    def test_a_fence_with_a_language_inside_a_code_block_is_code(self) -> None:
        # Reported: "```python" inside a block was taken as its closing fence.
        code = "\n".join(f"first_{i}()\n```python\nsecond_{i}()" for i in range(150))
        chunks = check(f"Intro\n\n```\n{code}\n```\n\nAfter **bold** text.", 1000)
        visible = "".join(text for _, text in chunks)
        assert visible.count("```python") == 150
        assert visible.count("second_") == 150
        blocks = [html for html, text in chunks if "first_" in text]
        assert len(blocks) >= 2
        assert all(html.count("<pre>") == html.count("</pre>") == 1 for html in blocks)
        assert chunks[-1][0].endswith("After <b>bold</b> text.")

    def test_a_four_backtick_block_spanning_messages_is_code_in_each(self) -> None:
        # Reported: from the second message on, such a block rendered as prose.
        inner = "\n".join(f"```python\nprint({i})\n```" for i in range(200))
        chunks = check(f"Example:\n\n````markdown\n{inner}\n````\n\nThat is all.")
        code = [html for html, text in chunks if "print(" in text]
        assert len(code) >= 2
        for html in code:
            assert html.count('<pre><code class="language-markdown">') == 1
            assert html.count("</code></pre>") == 1
        visible = "".join(text for _, text in chunks)
        assert visible.count("```python") == 200
        assert visible.count("print(") == 200
        assert chunks[-1][0].endswith("That is all.")

    def test_escapes_count_as_the_characters_they_show(self) -> None:
        # The HTML is four times longer than its text; Telegram counts the text.
        (chunk,) = check("<>&" * 1365)
        assert len(chunk[0]) > 4 * MESSAGE_LIMIT
        assert len(check("<>&" * 1365 + "\n\n" + "&" * 3000)) == 2

    def test_emoji_count_twice(self) -> None:
        chunks = check("👍🏽 " * 2000)
        assert len(chunks) >= 3

    def test_emoji_sequences_are_never_cut(self) -> None:
        # Reported: long runs without spaces were cut inside ZWJ families, flags, skin tones.
        family = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
        for cluster in (family, "\U0001f1fa\U0001f1e6", "\U0001f44d\U0001f3fd"):
            chunks = check(cluster * 600, 256)
            assert len(chunks) > 1
            assert all(re.fullmatch(f"(?:{re.escape(cluster)})+", text) for _, text in chunks)

    def test_non_latin_prose(self) -> None:
        sentence = (
            "Съешь же ещё этих мягких французских булок, да выпей чаю. 我们明天再讨论这个问题。"
        )
        check(" ".join([sentence] * 120))

    def test_a_formatting_entity_is_never_cut(self) -> None:
        text = " ".join(["plain words here"] * 200 + ["**bold words that stay together**"] * 60)
        for html, _ in check(text, 512):
            assert html.count("<b>") == html.count("</b>")


_word = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzÄöüжщя你好👍<>&\"' 0123456789"),
    min_size=1,
    max_size=12,
).filter(lambda w: w.strip() != "")
_inline = st.one_of(
    _word,
    _word.map(lambda w: f"**{w.strip()}**"),
    _word.map(lambda w: f"_{w.strip()}_"),
    _word.map(lambda w: f"`{w.strip()}`"),
    _word.map(lambda w: f"~~{w.strip()}~~"),
    _word.map(lambda w: f"[{w.strip()}](https://example.com/{len(w)})"),
)
_sentence = st.lists(_inline, min_size=1, max_size=40).map(" ".join)
_block = st.one_of(
    _sentence,
    _sentence.map(lambda s: f"## {s}"),
    st.lists(_sentence, min_size=1, max_size=5).map(
        lambda items: "\n".join(f"- {i}" for i in items)
    ),
    _sentence.map(lambda s: f"> {s}"),
    st.lists(_word, min_size=1, max_size=80).map(
        lambda lines: "```js\n" + "\n".join(lines) + "\n```"
    ),
)
_document = st.lists(_block, min_size=1, max_size=40).map("\n\n".join)


class TestProperties:
    @given(_document, st.sampled_from([256, 700, MESSAGE_LIMIT]))
    def test_every_chunk_fits_is_valid_and_nothing_is_lost(self, markdown: str, limit: int) -> None:
        check(markdown, limit)
