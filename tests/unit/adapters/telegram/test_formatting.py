"""Markdown to Telegram HTML: exact conversions, escaping, and validity for any input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.telegram.formatting import markdown_to_html
from tests.fixtures.platform_servers.telegram import HTMLParseError, parse_telegram_html


def visible(markdown: str) -> str:
    text, _ = parse_telegram_html(markdown_to_html(markdown))
    return text


class TestInline:
    @pytest.mark.parametrize(
        ("markdown", "expected"),
        [
            ("**bold**", "<b>bold</b>"),
            ("__bold__", "<b>bold</b>"),
            ("*it* and _it_", "<i>it</i> and <i>it</i>"),
            ("~~gone~~", "<s>gone</s>"),
            ("`a < b && c`", "<code>a &lt; b &amp;&amp; c</code>"),
            ("**bold _both_**", "<b>bold <i>both</i></b>"),
            ("[docs](https://example.com/a?b=1&c=2)", '<a href="https://example.com/a?b=1&amp;c=2">docs</a>'),
            ("[**bold link**](https://e.com)", '<a href="https://e.com"><b>bold link</b></a>'),
            ("snake_case_name stays", "snake_case_name stays"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("line one\nline two", "line one\nline two"),
            ("hard  \nbreak", "hard\nbreak"),
            ("see https://example.com/x", "see https://example.com/x"),
        ],
    )  # fmt: skip
    def test_converts(self, markdown: str, expected: str) -> None:
        assert markdown_to_html(markdown) == expected

    def test_text_is_escaped_and_raw_html_is_shown_not_run(self) -> None:
        html = markdown_to_html('<b>not bold</b> & <script>alert("x")</script>')
        assert "<b>" not in html
        assert "<script>" not in html
        assert visible('<b>not bold</b> & <script>alert("x")</script>') == (
            '<b>not bold</b> & <script>alert("x")</script>'
        )

    def test_unsafe_link_targets_are_not_links(self) -> None:
        html = markdown_to_html("[click](javascript:alert(1))")
        assert "href" not in html
        assert "click" in visible("[click](javascript:alert(1))")

    def test_relative_links_show_their_target(self) -> None:
        assert markdown_to_html("[readme](docs/README.md)") == "readme (docs/README.md)"

    def test_quotes_in_link_targets_are_escaped(self) -> None:
        html = markdown_to_html('[x](https://e.com/"onmouseover=")')
        assert '"onmouseover' not in html
        parse_telegram_html(html)

    def test_code_inside_a_link_is_text(self) -> None:
        # Telegram lets no other entity contain code, a link included.
        html = markdown_to_html("[`run()` now](https://e.com)")
        assert html == '<a href="https://e.com">run() now</a>'
        parse_telegram_html(html)

    def test_code_spans_with_backticks_and_html(self) -> None:
        assert markdown_to_html("``a`b <c> &amp;``") == "<code>a`b &lt;c&gt; &amp;amp;</code>"

    def test_image_becomes_a_link_and_nested_links_do_not_nest(self) -> None:
        assert markdown_to_html("![chart](https://e.com/c.png)") == (
            '<a href="https://e.com/c.png">chart</a>'
        )
        html = markdown_to_html("[![logo](https://e.com/l.png)](https://e.com)")
        assert html.count("<a ") == 1
        parse_telegram_html(html)


class TestBlocks:
    def test_headings_become_bold_lines(self) -> None:
        assert markdown_to_html("# Title\n\ntext") == "<b>Title</b>\n\ntext"

    def test_code_block_with_language(self) -> None:
        assert markdown_to_html("```python\nif a < b:\n    pass\n```") == (
            '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>'
        )

    def test_code_block_without_language_and_indented_code(self) -> None:
        assert markdown_to_html("```\nx\n```") == "<pre>x</pre>"
        assert markdown_to_html("    indented()") == "<pre>indented()</pre>"

    def test_odd_language_names_are_dropped(self) -> None:
        html = markdown_to_html('```py"><b>\ncode\n```')
        assert html == "<pre>code</pre>"

    def test_html_inside_code_is_escaped_once(self) -> None:
        assert markdown_to_html('```html\n<a href="x">&amp;</a>\n```') == (
            '<pre><code class="language-html">&lt;a href="x"&gt;&amp;amp;&lt;/a&gt;</code></pre>'
        )

    def test_nested_and_tilde_fences_stay_code(self) -> None:
        html = markdown_to_html("````md\n```python\nx\n```\n````\n\n~~~\n```\n~~~\nafter")
        assert html == (
            '<pre><code class="language-md">```python\nx\n```</code></pre>\n\n<pre>```</pre>\nafter'
        )

    def test_markdown_inside_code_is_literal(self) -> None:
        assert markdown_to_html("```\n**not bold** <b>\n```") == (
            "<pre>**not bold** &lt;b&gt;</pre>"
        )

    def test_lists_are_text_with_markers(self) -> None:
        markdown = "- one\n- two\n  - nested\n\n3. three\n4. four"
        assert markdown_to_html(markdown) == "• one\n• two\n   • nested\n\n3. three\n4. four"

    def test_blockquotes_do_not_nest(self) -> None:
        html = markdown_to_html("> outer\n>> inner\n\nafter")
        assert html == "<blockquote>outer\ninner</blockquote>\n\nafter"

    def test_tables_are_aligned_monospace(self) -> None:
        html = markdown_to_html("| name | n |\n|---|---|\n| alpha | 1 |\n| b | 22 |")
        assert html == "<pre>name  | n\n------+---\nalpha | 1\nb     | 22</pre>"

    def test_rule_and_empty_input(self) -> None:
        assert markdown_to_html("a\n\n---\n\nb") == "a\n\n———\n\nb"
        assert markdown_to_html("") == ""
        assert markdown_to_html("[ref]: https://e.com") == ""

    def test_non_latin_text_survives(self) -> None:
        markdown = "**Привет**, мир! 你好 — `код` 👋🏽"
        assert visible(markdown) == "Привет, мир! 你好 — код 👋🏽"


class TestTelegramAcceptsAnything:
    @given(st.text(max_size=400))
    def test_any_text_gives_valid_telegram_html(self, markdown: str) -> None:
        try:
            parse_telegram_html(markdown_to_html(markdown))
        except HTMLParseError as exc:  # pragma: no cover - the assertion explains
            pytest.fail(f"{markdown!r} -> invalid Telegram HTML: {exc}")

    @given(
        st.lists(
            st.sampled_from(
                ["**", "_", "*", "~~", "`", "```", "[", "](", ")", "<", ">", "&", "> ", "- ",
                 "1. ", "#", "\n", "\n\n", " ", "word", "ü", "😀", "http://x.y", "|", "---"]
            ),
            max_size=60,
        )
    )  # fmt: skip
    def test_markdown_soup_gives_valid_telegram_html(self, parts: list[str]) -> None:
        parse_telegram_html(markdown_to_html("".join(parts)))
