"""What Hubbub stores of inbound text: always encodable, no NUL or C0 controls, idempotent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters.text import storable, storable_text


@given(st.text(st.characters(codec=None, exclude_categories=())))
def test_any_string_becomes_storable_and_stays_so(text: str) -> None:
    cleaned = storable_text(text)
    cleaned.encode("utf-8")
    assert not any(ord(c) < 0x20 and c not in "\t\n\r" for c in cleaned)
    assert storable_text(cleaned) == cleaned


@given(st.text(st.characters(exclude_categories=("Cs", "Cc"))))
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert storable_text(text) == text


def test_surrogates_are_replaced_and_controls_removed() -> None:
    assert storable_text("a\ud800b\udfffc\x00d\x1be\tf\r\n") == "a\ufffdb\ufffdcde\tf\r\n"


def test_nested_values_are_cleaned_keys_included() -> None:
    cleaned = storable({"k\x00": ["\ud800", ("x\x01",), 5, None]})
    assert cleaned == {"k": ["\ufffd", ("x",), 5, None]}
