"""Discord messages stay under 2,000 characters, code blocks stay well formed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.chunks import MESSAGE_LIMIT, render_chunks, split_message
from adapters.discord.formatting import to_discord_markdown, to_literal_text

FENCE = re.compile(r"^(?:> )?```", re.MULTILINE)


def _words(text: str) -> list[str]:
    """Everything but whitespace and fence lines: what a reader must get, in order."""
    kept = [line for line in text.split("\n") if not line.strip().startswith("```")]
    return "".join(kept).split()


class TestRenderChunks:
    def test_short_reply_is_one_message(self) -> None:
        assert render_chunks("  **hello**  ") == ["**hello**"]

    def test_blank_reply_is_no_message(self) -> None:
        assert render_chunks(" \n\n ") == []

    def test_markdown_that_shows_nothing_is_sent_as_its_source(self) -> None:
        assert render_chunks("[ref]: https://e.com/a_b") == [r"\[ref\]: https://e.com/a_b"]

    def test_long_prose_splits_at_paragraphs_under_the_limit(self) -> None:
        paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(6)]
        chunks = render_chunks("\n\n".join(p.strip() for p in paragraphs))
        assert len(chunks) > 1
        assert all(len(c) <= MESSAGE_LIMIT for c in chunks)
        assert all(c.startswith("Paragraph") for c in chunks)

    def test_long_code_block_becomes_several_well_formed_blocks(self) -> None:
        code = "\n".join(
            f"    result_{i} = compute({i}, flag=True)  # step {i}" for i in range(150)
        )
        text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it twice."
        chunks = render_chunks(text)
        assert len(chunks) >= 3
        for chunk in chunks:
            assert len(chunk) <= MESSAGE_LIMIT
            assert len(FENCE.findall(chunk)) % 2 == 0
        code_chunks = [c for c in chunks if "result_" in c]
        assert all(c.count("```python\n") == 1 for c in code_chunks)
        lines = [ln for c in code_chunks for ln in c.split("\n") if "result_" in ln]
        assert lines == code.split("\n"), "indentation and order survive the cuts"

    def test_a_four_backtick_block_spanning_messages_is_code_in_each(self) -> None:
        inner = "\n".join(f"```python\nprint({i})\n```" for i in range(300))
        chunks = render_chunks(f"Example:\n\n````markdown\n{inner}\n````\n\nThat is all.")
        code = [c for c in chunks if "print(" in c]
        assert len(code) >= 2
        for chunk in code:
            assert chunk.count("```markdown\n") == 1
            assert len(re.findall("```", chunk)) == 2, "inner fences cannot close the block"
        assert sum(c.count("print(") for c in chunks) == 300
        assert chunks[-1].endswith("That is all.")

    def test_emoji_count_as_one_character_each(self) -> None:
        text = "🚀" * 1500
        assert render_chunks(text) == [text]

    def test_emoji_sequences_are_never_cut(self) -> None:
        family = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
        for cluster in (family, "\U0001f1fa\U0001f1e6", "\U0001f44d\U0001f3fd"):
            run = cluster * (2 * MESSAGE_LIMIT // len(cluster))
            chunks = render_chunks(f"`{run}`")
            assert len(chunks) > 1
            for chunk in chunks:
                assert len(chunk) <= MESSAGE_LIMIT
                assert re.fullmatch(f"`(?:{re.escape(cluster)})+`", chunk)
            literal = split_message(run)
            assert all(re.fullmatch(f"(?:{re.escape(cluster)})+", piece) for piece in literal)

    def test_limit_too_small(self) -> None:
        with pytest.raises(ValueError, match="at least 16"):
            render_chunks("hello", 10)


class TestLiteralFallback:
    def test_long_literal_text_is_cut_at_spaces(self) -> None:
        literal = to_literal_text("**word** " * 400)
        pieces = split_message(literal)
        assert len(pieces) > 1
        assert all(len(p) <= MESSAGE_LIMIT for p in pieces)
        assert " ".join(pieces).split() == literal.split()

    def test_never_between_a_backslash_and_what_it_escapes(self) -> None:
        pieces = split_message(to_literal_text("*" * 40), limit=16)
        assert all(len(p) <= 16 for p in pieces)
        assert all(not p.endswith("\\") or p.endswith("\\\\") for p in pieces)
        assert "".join(pieces) == to_literal_text("*" * 40)


_PIECES = st.sampled_from(
    [
        "The deploy moved to 10:30.",
        "**Decision:** roll back if the migration fails.",
        "`ALTER TABLE users ADD COLUMN x`",
        "中文的句子。还有一个。",
        "Привет, как дела?",
        "🚀🔥✅",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "```sql\n" + "SELECT * FROM events WHERE id = 1;\n" * 30 + "```",
        "````md\n" + "```py\nx = 1\n```\n" * 20 + "````",
        "word " * 120,
    ]
)


@given(st.lists(_PIECES, min_size=1, max_size=30))
def test_every_chunk_fits_and_nothing_is_lost(pieces: list[str]) -> None:
    markdown = "\n\n".join(pieces)
    chunks = render_chunks(markdown)
    for chunk in chunks:
        assert len(chunk) <= MESSAGE_LIMIT
        assert chunk.strip()
        assert len(FENCE.findall(chunk)) % 2 == 0, "code blocks are closed in every message"
        outside_code = re.sub(r"```.*?```", "", chunk, flags=re.DOTALL)
        assert outside_code.count("**") % 2 == 0, "bold is never cut"
        assert outside_code.count("`") % 2 == 0, "code spans are never cut"
    assert _words("\n".join(chunks)) == _words(to_discord_markdown(markdown))
