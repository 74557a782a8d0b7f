"""Cutting a document into messages: where the cuts go, and that nothing is lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.document import Block, CodeBlock, ListBlock, parse
from adapters.plaintext import PlainRenderer
from adapters.splitting import split_document, split_text


def _size(block: Block) -> tuple[int]:
    return (len(PlainRenderer().block(block)),)


def split(markdown: str, limit: int) -> list[str]:
    """The plain text of each message: the simplest renderer shows where the cuts went."""
    parts = split_document(parse(markdown), _size, limit)
    return [PlainRenderer().document(part) for part in parts]


def _visible(text: str) -> str:
    return re.sub(r"\s", "", text)


class TestWhereCutsGo:
    def test_short_text_is_one_message(self) -> None:
        assert split("hello", 100) == ["hello"]

    def test_paragraphs_first(self) -> None:
        text = "A" * 40 + "\n\n" + "B" * 40 + "\n\n" + "C" * 40
        assert split(text, 90) == ["A" * 40 + "\n\n" + "B" * 40, "C" * 40]

    def test_then_sentences(self) -> None:
        text = "One sentence here. Two sentence here. Three sentence here."
        assert split(text, 40) == ["One sentence here. Two sentence here.", "Three sentence here."]

    def test_a_sentence_end_too_early_loses_to_a_later_space(self) -> None:
        text = "Short. " + "word " * 20
        (first, *_) = split(text, 60)
        assert len(first) > 40

    def test_then_words(self) -> None:
        chunks = split("word " * 30, 32)
        assert all(len(c) <= 32 for c in chunks)
        assert " ".join(chunks).split() == ["word"] * 30

    def test_formatting_is_kept_whole_when_a_space_outside_it_fits(self) -> None:
        blocks = parse("aaaa bbbb **cccc dddd eeee** ffff gggg")
        parts = split_document(blocks, _size, 26)
        assert [PlainRenderer().document(p) for p in parts] == [
            "aaaa bbbb cccc dddd eeee",
            "ffff gggg",
        ]

    def test_one_enormous_word_is_cut(self) -> None:
        chunks = split("x" * 100, 30)
        assert "".join(chunks) == "x" * 100
        assert all(len(c) <= 30 for c in chunks)

    def test_non_latin_text(self) -> None:
        text = "Привет, мир. " * 40 + "こんにちは。" * 40
        chunks = split(text, 100)
        assert all(len(c) <= 100 for c in chunks)
        assert _visible("".join(chunks)) == _visible(text)


class TestCodeBlocks:
    def test_kept_whole_when_it_fits(self) -> None:
        markdown = "intro\n\n```python\nprint(1)\nprint(2)\n```\n\noutro"
        parts = split_document(parse(markdown), _size, 20)
        assert [len(part) for part in parts] == [1, 1, 1]

    def test_a_long_block_continues_as_code_of_the_same_language(self) -> None:
        code = "\n".join(f"line_{i} = {i}" for i in range(60))
        parts = split_document(parse(f"Here:\n\n```python\n{code}\n```\n\nDone."), _size, 200)
        blocks = [block for part in parts for block in part if isinstance(block, CodeBlock)]
        assert len(blocks) > 1
        assert {block.language for block in blocks} == {"python"}
        assert [ln for block in blocks for ln in block.code.split("\n")] == code.split("\n")

    def test_indentation_survives_a_cut(self) -> None:
        code = "\n".join(f"    step_{i}()" for i in range(40))
        parts = split_document(parse(f"```\n{code}\n```"), _size, 100)
        lines = [ln for part in parts for block in part for ln in block.code.split("\n")]  # type: ignore[union-attr]
        assert lines == code.split("\n")

    def test_fence_lines_inside_code_are_code(self) -> None:
        inner = "\n".join(["```python", "print(1)", "```"] * 20)
        chunks = split(f"````markdown\n{inner}\n````\n\nafter", 120)
        assert "".join(chunks).count("print(1)") == 20
        assert chunks[-1].endswith("after")


class TestLists:
    def test_a_cut_item_continues_without_a_second_bullet(self) -> None:
        chunks = split("- one two three four\n- five six seven eight nine ten eleven\n- x", 30)
        assert chunks == ["• one two three four", "• five six seven eight nine", "ten eleven\n• x"]

    def test_numbers_carry_on(self) -> None:
        chunks = split("1. one two three four\n2. five six seven eight nine ten eleven\n3. x", 30)
        assert chunks == [
            "1. one two three four",
            "2. five six seven eight nine",
            "ten eleven\n3. x",
        ]

    def test_a_list_is_cut_between_items_first(self) -> None:
        items = "\n".join(f"- item {i} is here" for i in range(10))
        parts = split_document(parse(items), _size, 60)
        assert all(isinstance(part[0], ListBlock) for part in parts)
        assert all(not part[0].items[0].continued for part in parts)  # type: ignore[union-attr]


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
FLAG = "\U0001f1fa\U0001f1e6"
THUMB = "\U0001f44d\U0001f3fd"
ACCENTED = "e\u0301\u0323"


class TestGraphemes:
    @pytest.mark.parametrize("cluster", [FAMILY, FLAG, THUMB, ACCENTED])
    @pytest.mark.parametrize("limit", [16, 17, 23, 50])
    def test_a_long_run_is_cut_between_clusters(self, cluster: str, limit: int) -> None:
        run = "x" + cluster * 40
        chunks = split(run, limit)
        assert "".join(chunks) == run
        assert all(re.fullmatch(f"x?(?:{re.escape(cluster)})+", chunk) for chunk in chunks)

    def test_code_is_cut_between_clusters_too(self) -> None:
        parts = split_document(parse(f"```\n{FAMILY * 30}\n```"), _size, 50)
        codes = [block.code for part in parts for block in part]  # type: ignore[union-attr]
        assert all(re.fullmatch(f"(?:{FAMILY})+", code) for code in codes)

    def test_a_cluster_longer_than_the_limit_is_cut_rather_than_lost(self) -> None:
        huge = "a" + "\u0301" * 40
        assert "".join(split(huge, 16)) == huge
        assert "".join(split_text(huge, 16)) == huge

    def test_plain_text_is_cut_between_clusters(self) -> None:
        pieces = split_text(FLAG * 40, 17)
        assert all(re.fullmatch(f"(?:{FLAG})+", piece) for piece in pieces)


class TestTinyLimits:
    def test_deep_nesting_in_a_tiny_limit_still_fits(self) -> None:
        nested = "\n".join("  " * depth + "- level" for depth in range(12))
        whole = PlainRenderer().document(parse(nested))
        chunks = split(nested, 16)
        assert all(len(c) <= 16 for c in chunks)
        assert _visible("".join(chunks)).replace("•", "") == _visible(whole).replace("•", "")


class TestSplitText:
    def test_cuts_at_spaces(self) -> None:
        assert split_text("hello world " * 10, 30) == [
            "hello world hello world hello",
            *[
                "world hello world hello world",
                "hello world hello world hello",
                "world hello world hello world",
            ],
        ]

    def test_can_forbid_cuts(self) -> None:
        pieces = split_text("ab" * 20, 16, can_cut=lambda text, i: text[i - 1] == "b")
        assert all(piece.endswith("b") for piece in pieces)
        assert "".join(pieces) == "ab" * 20

    def test_a_limit_below_one_character_is_refused(self) -> None:
        with pytest.raises(ValueError, match="cannot hold"):
            split_text("abc", 0)


_PROSE = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300)
_CODE = st.builds(
    lambda fence, lang, body: f"{fence}{lang}\n{body}\n{fence}",
    st.sampled_from(["```", "~~~", "````"]),
    st.sampled_from(["", "python", "js"]),
    st.text(alphabet="abc xyz=()`~\n", max_size=400),
)


@given(st.lists(st.one_of(_PROSE, _CODE), max_size=8), st.integers(min_value=16, max_value=300))
def test_every_message_fits_and_nothing_is_lost(parts: list[str], limit: int) -> None:
    markdown = "\n\n".join(parts)
    whole = PlainRenderer().document(parse(markdown))
    chunks = split(markdown, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    assert _visible("".join(chunks)) == _visible(whole)
