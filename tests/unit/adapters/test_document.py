"""Parsing a reply into the shared document: CommonMark's structure, hostile text made safe."""

from __future__ import annotations

import pytest

from adapters.document import (
    CodeBlock,
    CodeSpan,
    Heading,
    LineBreak,
    Link,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Text,
    display_width,
    inline_text,
    parse,
)


class TestFences:
    def test_a_fence_with_an_info_string_does_not_close_a_block(self) -> None:
        (code, after) = parse("```\nfirst\n```python\nsecond\n```\n\nafter")
        assert code == CodeBlock("first\n```python\nsecond")
        assert after == Paragraph((Text("after"),), gap=True)

    def test_a_shorter_fence_does_not_close_a_longer_one(self) -> None:
        (code,) = parse("````markdown\nHere:\n```python\nprint(1)\n```\ndone\n````")
        assert code == CodeBlock("Here:\n```python\nprint(1)\n```\ndone", "markdown")

    def test_backticks_do_not_close_tildes(self) -> None:
        (code, after) = parse("~~~\n```\ninside\n```\n~~~\nafter")
        assert code == CodeBlock("```\ninside\n```")
        assert after == Paragraph((Text("after"),))

    def test_fences_may_be_indented_up_to_three_spaces(self) -> None:
        (code,) = parse("   ```js\n   x = 1\n   ```")
        assert code == CodeBlock("x = 1", "js")
        (indented,) = parse("    ```js\n    x = 1")
        assert indented == CodeBlock("```js\nx = 1")

    def test_an_unclosed_fence_runs_to_the_end(self) -> None:
        (intro, code) = parse("intro\n\n```sh\nls\n\n**not bold**")
        assert intro == Paragraph((Text("intro"),))
        assert code == CodeBlock("ls\n\n**not bold**", "sh", gap=True)

    def test_empty_code_shows_nothing(self) -> None:
        assert parse("```\n```") == ()
        assert parse("```\n   \n```") == ()


class TestStructure:
    def test_blank_lines_between_blocks_are_remembered(self) -> None:
        blocks = parse("Steps:\n- one\n- two\n\nDone.")
        assert [type(b) for b in blocks] == [Paragraph, ListBlock, Paragraph]
        assert [b.gap for b in blocks] == [False, False, True]

    def test_trailing_blank_lines_of_a_list_are_not_the_lists(self) -> None:
        (_, after) = parse("1. x\n2. y\n\n\n\nafter")
        assert after.gap

    def test_lists(self) -> None:
        (bullets, numbers) = parse("- a\n- [ ] todo\n- [x] done\n\n3. c\n\n   more")
        assert isinstance(bullets, ListBlock)
        assert bullets.tight
        assert [inline_text(i.blocks[0].inlines) for i in bullets.items] == [  # type: ignore[union-attr]
            "a",
            "☐ todo",
            "☑ done",
        ]
        assert isinstance(numbers, ListBlock)
        assert (numbers.ordered, numbers.start, numbers.tight) == (True, 3, False)

    def test_headings_quotes_and_rules(self) -> None:
        (heading, quote, rule) = parse("## Plan ##\n\n> quoted\n\n---")
        assert heading == Heading(2, (Text("Plan"),))
        assert quote == Quote((Paragraph((Text("quoted"),)),), gap=True)
        assert rule == Rule(gap=True)

    def test_inline_content(self) -> None:
        (paragraph,) = parse("**b** *i* ~~s~~ `c` [l](https://e.com)  \nnext")
        assert paragraph == Paragraph(
            (
                Styled("strong", (Text("b"),)),
                Text(" "),
                Styled("em", (Text("i"),)),
                Text(" "),
                Styled("strike", (Text("s"),)),
                Text(" "),
                CodeSpan("c"),
                Text(" "),
                Link("https://e.com", (Text("l"),)),
                LineBreak(),
                Text("next"),
            )
        )

    def test_links_without_labels_and_images_show_their_target(self) -> None:
        (paragraph,) = parse("[](https://e.com) ![](https://e.com/i.png) ![a *cat*](c.png)")
        links = [node for node in paragraph.inlines if isinstance(node, Link)]  # type: ignore[union-attr]
        assert links == [
            Link("https://e.com", (Text("https://e.com"),)),
            Link("https://e.com/i.png", (Text("https://e.com/i.png"),)),
            Link("c.png", (Text("a cat"),)),
        ]


class TestTables:
    def test_a_table_becomes_aligned_columns(self) -> None:
        markdown = "| Name | Qty |\n|:--|--:|\n| **apple** | 3 |\n| [pear](https://p.t) | 10 |"
        (table,) = parse(markdown)
        assert table == CodeBlock(
            "Name               | Qty\n"
            "-------------------+----\n"
            "apple              | 3\n"
            "pear (https://p.t) | 10"
        )

    def test_wide_characters_take_two_columns(self) -> None:
        (table,) = parse("| 名前 | n |\n|---|---|\n| ab | 1 |")
        assert isinstance(table, CodeBlock)
        assert table.code.split("\n") == ["名前 | n", "-----+--", "ab   | 1"]
        assert display_width("名前") == 4

    def test_emoji_sequences_take_two_columns(self) -> None:
        family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
        (table,) = parse(f"| who | n |\n|---|---|\n| {family} | 1 |\n| ab | 2 |")
        assert isinstance(table, CodeBlock)
        assert table.code.split("\n")[2:] == [f"{family}  | 1", "ab  | 2"]
        assert display_width(family) == display_width("\U0001f1fa\U0001f1e6") == 2
        assert display_width("e\u0301") == 1


class TestHostileText:
    @pytest.mark.parametrize("tag", ["<br>", "<br/>", "<BR />"])
    def test_br_is_a_line_break_and_other_html_is_text(self, tag: str) -> None:
        (paragraph,) = parse(f"one{tag}two <b>three</b>")
        assert paragraph == Paragraph((Text("one"), LineBreak(), Text("two <b>three</b>")))

    def test_lone_surrogates_and_nul_are_replaced(self) -> None:
        (paragraph,) = parse("a\ud800b\x00c")
        assert paragraph == Paragraph((Text("a\ufffdb\ufffdc"),))

    def test_carriage_returns_are_line_ends(self) -> None:
        assert parse("a\r\n\r\nb\rc") == (
            Paragraph((Text("a"),)),
            Paragraph((Text("b"), LineBreak(), Text("c")), gap=True),
        )

    def test_nothing_to_show(self) -> None:
        assert parse("") == ()
        assert parse("  \n\n ") == ()
        assert parse("[ref]: https://e.com") == ()
