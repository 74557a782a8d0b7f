from __future__ import annotations

import pytest

from adapters.rendering import BULLET
from adapters.slack.mrkdwn import FENCE_BREAK, RULE, WORD_JOINER, escape, to_mrkdwn
from adapters.slack.text import mentioned_users, mentions, strip_leading_mention, to_plain


class TestInline:
    @pytest.mark.parametrize(
        ("markdown", "mrkdwn"),
        [
            ("**bold**", "*bold*"),
            ("__bold__", "*bold*"),
            ("*italic*", "_italic_"),
            ("_italic_", "_italic_"),
            ("***both***", "_*both*_"),
            ("~~gone~~", "~gone~"),
            ("`a < b && c`", "`a &lt; b &amp;&amp; c`"),
            ("[docs](https://example.com/a?x=1&y=2)", "<https://example.com/a?x=1&amp;y=2|docs>"),
            ("[same](https://example.com)", "<https://example.com|same>"),
            ("[https://example.com](https://example.com)", "<https://example.com>"),
            ("<https://example.com/raw>", "<https://example.com/raw>"),
            ("![diagram](https://example.com/d.png)", "<https://example.com/d.png|diagram>"),
            ("[readme](docs/README.md)", "readme (docs/README.md)"),
            ("a < b > c & d", "a &lt; b &gt; c &amp; d"),
            ("**bold with [link](https://x.io)**", "*bold with <https://x.io|link>*"),
            ("**bold _and italic_**", "*bold _and italic_*"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            (r"\*literal\*", "*literal*"),
            ("[a|b](https://x.io/p|q)", "<https://x.io/p%7Cq|a|b>"),
        ],
    )
    def test_converts(self, markdown: str, mrkdwn: str) -> None:
        assert to_mrkdwn(markdown) == mrkdwn

    def test_markers_next_to_letters_get_a_boundary(self) -> None:
        assert to_mrkdwn("**foo**bar") == f"*foo*{WORD_JOINER}bar"
        assert to_mrkdwn("日本語の**太字**です") == f"日本語の{WORD_JOINER}*太字*{WORD_JOINER}です"

    def test_non_latin_text_is_kept(self) -> None:
        text = "Привет, **мир**! Ελληνικά _κείμενο_ 🚀"
        assert to_mrkdwn(text) == "Привет, *мир*! Ελληνικά _κείμενο_ 🚀"


class TestBlocks:
    def test_heading_becomes_bold_line(self) -> None:
        assert to_mrkdwn("## Deploy plan ##") == "*Deploy plan*"

    def test_heading_with_bold_inside_is_not_double_bolded(self) -> None:
        assert to_mrkdwn("# The **plan**") == "*The plan*"

    def test_lists(self) -> None:
        markdown = "- one\n* two\n  + nested\n1. first\n- [ ] open\n- [x] done"
        assert to_mrkdwn(markdown).split("\n") == [
            f"{BULLET} one",
            f"{BULLET} two",
            f"  {BULLET} nested",
            "1. first",
            f"{BULLET} ☐ open",
            f"{BULLET} ☑ done",
        ]

    def test_quote_keeps_its_marker_unescaped(self) -> None:
        assert to_mrkdwn("> a <b> quote") == "> a &lt;b&gt; quote"

    def test_rule(self) -> None:
        assert to_mrkdwn("above\n\n---\n\nbelow") == f"above\n\n{RULE}\n\nbelow"

    def test_code_block_drops_language_and_escapes(self) -> None:
        markdown = "```python\nif a < b:\n    print('&')\n```"
        assert to_mrkdwn(markdown) == "```\nif a &lt; b:\n    print('&amp;')\n```"

    def test_markdown_inside_code_is_left_alone(self) -> None:
        assert to_mrkdwn("```\n**not bold** [x](y)\n```") == "```\n**not bold** [x](y)\n```"

    def test_unterminated_code_block_is_closed(self) -> None:
        assert to_mrkdwn("```\ncode") == "```\ncode\n```"

    def test_table_becomes_an_aligned_code_block(self) -> None:
        markdown = "| a | bee |\n|---|:-:|\n| 1 & 2 | <3 |\n\nafter"
        assert to_mrkdwn(markdown) == (
            "```\na     | bee\n------+----\n1 &amp; 2 | &lt;3\n```\n\nafter"
        )

    def test_a_fence_with_a_language_inside_a_code_block_is_code(self) -> None:
        markdown = "```\nfirst\n```python\nsecond\n```\n\nafter **bold**"
        assert to_mrkdwn(markdown) == (
            f"```\nfirst\n``{FENCE_BREAK}`python\nsecond\n```\n\nafter *bold*"
        )

    def test_nested_fences_stay_inside_their_block(self) -> None:
        markdown = "````md\nHere:\n```python\nprint(1)\n```\n````\n\n~~~\n```\n~~~\nafter"
        assert to_mrkdwn(markdown) == (
            f"```\nHere:\n``{FENCE_BREAK}`python\nprint(1)\n``{FENCE_BREAK}`\n```\n\n"
            f"```\n``{FENCE_BREAK}`\n```\nafter"
        )

    def test_indented_fence_and_indented_code(self) -> None:
        assert to_mrkdwn("   ```\n   a < b\n   ```") == "```\na &lt; b\n```"
        indented = to_mrkdwn("text\n\n    ```\n    x")
        assert indented == f"text\n\n```\n``{FENCE_BREAK}`\nx\n```"

    def test_code_spans_with_backticks_and_escapes(self) -> None:
        assert to_mrkdwn("``a`b & <c>``") == "`aˋb &amp; &lt;c&gt;`"  # noqa: RUF001

    def test_links_are_escaped_inside(self) -> None:
        assert to_mrkdwn("[a <b> & c](https://e.com/?q=<x>&y=1)") == (
            "<https://e.com/?q=%3Cx%3E&amp;y=1|a &lt;b&gt; &amp; c>"
        )

    def test_escape(self) -> None:
        assert escape("<&>") == "&lt;&amp;&gt;"


class TestInboundText:
    def test_mentions_become_names(self) -> None:
        text = "<@U0ALICE> and <@U0HUBBUB|hubbub> see <#C0GENERAL|general> <!here> <!channel>"
        names = {"U0ALICE": "Alice", "U0HUBBUB": "hubbub"}
        assert to_plain(text, names) == "@Alice and @hubbub see #general @here @channel"

    def test_unknown_mention_keeps_id(self) -> None:
        assert to_plain("hi <@U0NOBODY>") == "hi @U0NOBODY"

    def test_links_and_escapes(self) -> None:
        text = (
            "see <https://ci.example.com/b/1|build 1> &amp; <https://x.io> &lt;3 "
            "<mailto:a@b.io|a@b.io>"
        )
        assert to_plain(text) == "see build 1 (https://ci.example.com/b/1) & https://x.io <3 a@b.io"

    def test_special_tokens(self) -> None:
        text = "<!subteam^S0OPS|@ops> <!date^1392734382^{date}|Feb 18, 2014>"
        assert to_plain(text) == "@ops Feb 18, 2014"

    def test_strip_leading_mention(self) -> None:
        assert strip_leading_mention("<@U0HUBBUB> hi there", "U0HUBBUB") == "hi there"
        assert strip_leading_mention("<@U0HUBBUB>, /new", "U0HUBBUB") == "/new"
        assert strip_leading_mention("hi <@U0HUBBUB>", "U0HUBBUB") == "hi <@U0HUBBUB>"
        assert strip_leading_mention("<@U0ALICE> hi", "U0HUBBUB") == "<@U0ALICE> hi"
        assert strip_leading_mention("<@U0HUBBUB>", "U0HUBBUB") == "<@U0HUBBUB>"

    def test_mentions(self) -> None:
        text = "<@U0ALICE> <@U0HUBBUB|hubbub> <@U0ALICE> <@W0ENTERPRISE>"
        assert mentioned_users(text) == ["U0ALICE", "U0HUBBUB", "W0ENTERPRISE"]
        assert mentions(text, "U0HUBBUB")
        assert not mentions("mail me at hubbub@example.com", "U0HUBBUB")
