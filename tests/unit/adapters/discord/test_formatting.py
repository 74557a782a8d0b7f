"""Markdown to Discord Markdown, and the escaped fallback."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.formatting import (
    FENCE_BREAK,
    RULE,
    to_discord_markdown,
    to_literal_text,
)
from adapters.document import display_width


class TestPassThrough:
    @pytest.mark.parametrize(
        "text",
        [
            "**bold**, *italic*, ~~gone~~ and `code`",
            "# Title\n## Section\n### Sub",
            "- one\n- two\n  - nested\n1. first\n2. second",
            "> quoted\n> still quoted",
            "see [the docs](https://example.com/docs) or <https://example.com>",
            "```python\nprint('hi')\n```",
            "snake_case_name and 2 * 3 * 4",
            "Привет, мир! 你好，世界。🚀",  # noqa: RUF001 (non-Latin punctuation on purpose)
        ],
    )
    def test_what_discord_renders_already_is_unchanged(self, text: str) -> None:
        assert to_discord_markdown(text) == text


class TestRewrites:
    def test_double_underscore_is_bold_not_underline(self) -> None:
        assert to_discord_markdown("a __very__ big deal") == "a **very** big deal"

    def test_intraword_double_underscores_are_escaped(self) -> None:
        assert to_discord_markdown("foo__bar__baz") == r"foo\_\_bar\_\_baz"

    def test_code_is_never_touched(self) -> None:
        text = "`__init__ || x` and\n```\n__a__ || b\n#### not a heading\n| a | b |\n|---|---|\n```"
        assert to_discord_markdown(text) == text

    def test_urls_are_never_touched(self) -> None:
        text = "https://example.com/a__b__c and [x](https://example.com/__y__||z)"
        assert to_discord_markdown(text) == (
            "https://example.com/a__b__c and [x](https://example.com/__y__%7C%7Cz)"
        )

    def test_deep_headings_become_bold(self) -> None:
        assert to_discord_markdown("#### Notes ####") == "**Notes**"
        assert to_discord_markdown("###### Tiny") == "**Tiny**"

    def test_setext_headings(self) -> None:
        assert to_discord_markdown("Title\n=====\ntext") == "# Title\ntext"
        assert to_discord_markdown("Section\n-------") == "## Section"

    @pytest.mark.parametrize("rule", ["---", "***", "___", "- - -", " * * *"])
    def test_horizontal_rules_become_a_line(self, rule: str) -> None:
        assert to_discord_markdown(f"above\n\n{rule}\n\nbelow") == f"above\n\n{RULE}\n\nbelow"

    def test_images_become_links(self) -> None:
        assert to_discord_markdown("![a cat](https://x.test/cat.png)") == (
            "[a cat](https://x.test/cat.png)"
        )
        assert to_discord_markdown("![](https://x.test/cat.png)") == "<https://x.test/cat.png>"

    def test_spoiler_markers_are_escaped(self) -> None:
        assert to_discord_markdown("use a || b here") == r"use a \|\| b here"

    def test_subtext_marker_is_escaped(self) -> None:
        assert to_discord_markdown("-# not small") == r"\-# not small"

    def test_task_lists(self) -> None:
        assert to_discord_markdown("- [ ] todo\n- [x] done") == "- \u2610 todo\n- \u2611 done"

    def test_line_breaks(self) -> None:
        assert to_discord_markdown("one<br>two<br/>three") == "one\ntwo\nthree"

    def test_tilde_fences_become_backticks(self) -> None:
        assert to_discord_markdown("~~~sql\nselect 1;\n~~~") == "```sql\nselect 1;\n```"

    def test_unterminated_fence_is_closed(self) -> None:
        assert to_discord_markdown("```\ncode") == "```\ncode\n```"

    def test_a_fence_with_a_language_inside_a_code_block_is_code(self) -> None:
        markdown = "```\nfirst\n```python\nsecond\n```\n\nafter __bold__"
        assert to_discord_markdown(markdown) == (
            f"```\nfirst\n``{FENCE_BREAK}`python\nsecond\n```\n\nafter **bold**"
        )

    def test_nested_fences_stay_inside_their_block(self) -> None:
        markdown = "````md\nHere:\n```python\nprint(1)\n```\n````\n\n~~~\n```\n~~~\nafter"
        assert to_discord_markdown(markdown) == (
            f"```md\nHere:\n``{FENCE_BREAK}`python\nprint(1)\n``{FENCE_BREAK}`\n```\n\n"
            f"```\n``{FENCE_BREAK}`\n```\nafter"
        )

    def test_indented_fences_and_odd_languages(self) -> None:
        assert to_discord_markdown("   ```js\n   x\n   ```") == "```js\nx\n```"
        assert to_discord_markdown('```py"><b>\nx\n```') == "```\nx\n```"

    def test_code_spans_keep_their_backticks(self) -> None:
        assert to_discord_markdown("use ``a`b`` and `` `x` ``") == "use ``a`b`` and `` `x` ``"

    def test_a_code_span_never_holds_three_backticks(self) -> None:
        # Three backticks anywhere open a code block in Discord.
        assert to_discord_markdown("see ```` a```b ````") == (
            f"see ``a`{FENCE_BREAK}`{FENCE_BREAK}`b``"
        )

    def test_an_escaped_backtick_before_a_code_span_opens_no_code_block(self) -> None:
        # The property tests' minimal case: the text's backtick and the span's `` made ```.
        assert to_discord_markdown(r"\```a`b``") == f"\\`{FENCE_BREAK}``a`b``"

    def test_markup_characters_in_text_are_escaped(self) -> None:
        assert to_discord_markdown(r"\*not italic\* a\_b ~\~x\~~ 5 \* 3") == (
            r"\*not italic\* a_b \~\~x\~\~ 5 * 3"
        )
        assert to_discord_markdown("1\\. not a list\n\\# not a heading") == (
            "1\\. not a list\n\\# not a heading"
        )

    def test_links_discord_cannot_open_show_their_target(self) -> None:
        assert to_discord_markdown("[readme](docs/README.md)") == "readme (docs/README.md)"
        assert to_discord_markdown("[a [b] c](https://e.com/x(1))") == (
            r"[a \[b\] c](https://e.com/x%281%29)"
        )


class TestTables:
    def test_table_becomes_an_aligned_code_block(self) -> None:
        table = "| Name | Qty |\n|:-----|----:|\n| **apple** | 3 |\n| [pear](https://p.test) | 10 |"
        assert to_discord_markdown(f"Stock:\n\n{table}\n\nDone.") == (
            "Stock:\n\n"
            "```\n"
            "Name                  | Qty\n"
            "----------------------+----\n"
            "apple                 | 3\n"
            "pear (https://p.test) | 10\n"
            "```\n\n"
            "Done."
        )

    def test_wide_characters_take_two_columns(self) -> None:
        rendered = to_discord_markdown("| 名前 | n |\n|---|---|\n| ab | 1 |")
        lines = rendered.split("\n")[1:-1]
        assert lines[0] == "名前 | n"
        assert lines[2] == "ab   | 1"
        assert display_width("名前") == 4

    def test_table_without_outer_pipes_and_short_rows(self) -> None:
        rendered = to_discord_markdown("a | b | c\n--|---|--\n1 | 2\n")
        assert rendered.startswith("```\na | b | c\n--+---+--\n1 | 2")

    def test_pipes_without_a_separator_row_are_prose(self) -> None:
        assert to_discord_markdown("a | b\nc | d") == "a | b\nc | d"


class TestLiteralFallback:
    def test_every_markdown_character_is_escaped(self) -> None:
        assert to_literal_text("**b** _i_ `c` ~~s~~ ||x||") == (
            r"\*\*b\*\* \_i\_ \`c\` \~\~s\~\~ \|\|x\|\|"
        )

    def test_links_stay_clickable(self) -> None:
        assert to_literal_text("see https://x.test/a_b_c") == "see https://x.test/a_b_c"

    @given(st.text(alphabet=st.sampled_from(list("ab *_`~|>#-\n")), max_size=60))
    def test_unescaping_gives_the_text_back(self, text: str) -> None:
        assert re.sub(r"\\(.)", r"\1", to_literal_text(text), flags=re.DOTALL) == text


@given(
    st.lists(
        st.sampled_from(
            [
                "plain words",
                "**bold words**",
                "__strong__",
                "`code span`",
                "a || b",
                "#### deep",
                "---",
                "| x | y |\n|---|---|\n| 1 | 2 |",
                "```\ncode ** here\n```",
                "中文字符",
                "🚀🚀",
            ]
        ),
        max_size=12,
    )
)
def test_conversion_keeps_every_word(parts: list[str]) -> None:
    source = "\n\n".join(parts)
    words = re.findall(r"[A-Za-z0-9]+|[^\x00-\x7f]", source)
    converted_words = re.findall(r"[A-Za-z0-9]+|[^\x00-\x7f]", to_discord_markdown(source))
    assert [w for w in converted_words if w not in ("\u2500",)] == words
