from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from adapters.splitting import split_markdown


def _fences_balanced(chunk: str) -> bool:
    return len(re.findall(r"^\s*```", chunk, flags=re.MULTILINE)) % 2 == 0


class TestSplitMarkdown:
    def test_short_text_is_one_chunk(self) -> None:
        assert split_markdown("hello", 100) == ["hello"]

    def test_paragraphs_first(self) -> None:
        text = "A" * 40 + "\n\n" + "B" * 40 + "\n\n" + "C" * 40
        assert split_markdown(text, 90) == ["A" * 40 + "\n\n" + "B" * 40, "C" * 40]

    def test_then_sentences(self) -> None:
        text = "One sentence here. Two sentence here. Three sentence here."
        chunks = split_markdown(text, 40)
        assert chunks == ["One sentence here. Two sentence here.", "Three sentence here."]

    def test_then_words(self) -> None:
        chunks = split_markdown("word " * 30, 32)
        assert all(len(c) <= 32 for c in chunks)
        assert all(not c.startswith(" ") and "wor d" not in c for c in chunks)
        assert " ".join(chunks).split() == ["word"] * 30

    def test_never_inside_bold(self) -> None:
        text = "aaaa bbbb **cccc dddd eeee** ffff"
        for chunk in split_markdown(text, 24):
            assert chunk.count("**") % 2 == 0

    def test_code_block_kept_whole_when_it_fits(self) -> None:
        text = "intro\n\n```python\nprint(1)\nprint(2)\n```\n\noutro"
        chunks = split_markdown(text, 40)
        assert any("```python\nprint(1)\nprint(2)\n```" in c for c in chunks)

    def test_long_code_block_becomes_several_well_formed_ones(self) -> None:
        code = "\n".join(f"line_{i} = {i}" for i in range(60))
        text = f"Here:\n\n```python\n{code}\n```\n\nDone."
        chunks = split_markdown(text, 200)
        assert all(len(c) <= 200 for c in chunks)
        assert all(_fences_balanced(c) for c in chunks)
        code_chunks = [c for c in chunks if "line_" in c]
        assert len(code_chunks) > 1
        assert all("```python\n" in c for c in code_chunks)
        rebuilt = [ln for c in code_chunks for ln in c.split("\n") if ln.startswith("line_")]
        assert rebuilt == code.split("\n")

    def test_unterminated_fence_is_closed(self) -> None:
        chunks = split_markdown("```\n" + "x\n" * 100, 50)
        assert all(_fences_balanced(c) for c in chunks)

    def test_one_enormous_word_is_cut(self) -> None:
        chunks = split_markdown("x" * 100, 30)
        assert "".join(chunks) == "x" * 100
        assert all(len(c) <= 30 for c in chunks)

    def test_non_latin_text(self) -> None:
        text = "Привет, мир. " * 40 + "こんにちは。" * 40
        chunks = split_markdown(text, 100)
        assert all(len(c) <= 100 for c in chunks)
        assert "".join(chunks).replace(" ", "") == text.replace(" ", "")


@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300),
            st.builds(
                lambda lang, body: f"```{lang}\n{body}\n```",
                st.sampled_from(["", "python", "js"]),
                st.text(alphabet="abc xyz=()\n", max_size=400),
            ),
        ),
        max_size=8,
    ),
    st.integers(min_value=16, max_value=300),
)
def test_every_chunk_fits_and_fences_balance(parts: list[str], limit: int) -> None:
    text = "\n\n".join(parts)
    chunks = split_markdown(text, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    if "```" in text and text.count("```") % 2 == 0:
        assert all(_fences_balanced(chunk) for chunk in chunks)
    if "```" not in text and "~~~" not in text:
        assert re.sub(r"\s", "", "".join(chunks)) == re.sub(r"\s", "", text), "nothing lost"
