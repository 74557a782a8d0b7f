"""Discord messages stay under 2,000 UTF-16 code units, code blocks stay well formed."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.chunks import MESSAGE_LIMIT, split_message, utf16_length
from adapters.discord.formatting import to_discord_markdown

FENCE = re.compile(r"^```", re.MULTILINE)


def _words(text: str) -> list[str]:
    """Everything but whitespace and fence lines: what a reader must get, in order."""
    kept = [line for line in text.split("\n") if not line.strip().startswith("```")]
    return "".join(kept).split()


class TestSplitMessage:
    def test_short_reply_is_one_message(self) -> None:
        assert split_message("  hello  ") == ["hello"]

    def test_blank_reply_is_no_message(self) -> None:
        assert split_message(" \n\n ") == []

    def test_long_prose_splits_at_paragraphs_under_the_limit(self) -> None:
        paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(6)]
        chunks = split_message("\n\n".join(p.strip() for p in paragraphs))
        assert len(chunks) > 1
        assert all(utf16_length(c) <= MESSAGE_LIMIT for c in chunks)
        assert all(c.startswith("Paragraph") for c in chunks)

    def test_long_code_block_becomes_several_well_formed_blocks(self) -> None:
        code = "\n".join(
            f"    result_{i} = compute({i}, flag=True)  # step {i}" for i in range(150)
        )
        text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it twice."
        chunks = split_message(text)
        assert len(chunks) >= 3
        for chunk in chunks:
            assert utf16_length(chunk) <= MESSAGE_LIMIT
            assert len(FENCE.findall(chunk)) % 2 == 0
        code_chunks = [c for c in chunks if "result_" in c]
        assert all(c.lstrip().startswith("```python") or "```python" in c for c in code_chunks)
        assert _words("\n".join(chunks)) == _words(text)

    def test_emoji_count_twice(self) -> None:
        text = "🚀" * 1500
        assert len(text) <= MESSAGE_LIMIT < utf16_length(text)
        chunks = split_message(text)
        assert len(chunks) == 2
        assert all(utf16_length(c) <= MESSAGE_LIMIT for c in chunks)
        assert "".join(chunks) == text

    def test_tiny_limits_still_fit(self) -> None:
        chunks = split_message("🚀" * 40, limit=16)
        assert all(utf16_length(c) <= 16 for c in chunks)
        assert "".join(chunks) == "🚀" * 40


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
        "word " * 120,
    ]
)


@given(st.lists(_PIECES, min_size=1, max_size=30))
def test_every_chunk_fits_and_nothing_is_lost(pieces: list[str]) -> None:
    source = to_discord_markdown("\n\n".join(pieces))
    chunks = split_message(source)
    for chunk in chunks:
        assert utf16_length(chunk) <= MESSAGE_LIMIT
        assert chunk.strip()
        assert len(FENCE.findall(chunk)) % 2 == 0, "code blocks are closed in every message"
        assert chunk.count("**") % 2 == 0, "bold is never cut"
        outside_code = re.sub(r"```.*?```", "", chunk, flags=re.DOTALL)
        assert outside_code.count("`") % 2 == 0, "code spans are never cut"
    assert _words("\n".join(chunks)) == _words(source)
