from __future__ import annotations

import pytest

from adapters.commands import parse_command


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/help", ("help", "")),
        ("/compress  the auth bug ", ("compress", "the auth bug")),
        ("/New", ("new", "")),
        ("/usage@hubbub_bot", ("usage", "")),
        ("hello /help", None),
        ("/", None),
        ("/123", None),
        ("// comment", None),
    ],
)
def test_parse(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_command(text, bot_username="hubbub_bot") == expected


def test_command_for_another_bot_is_not_ours() -> None:
    assert parse_command("/help@other_bot", bot_username="hubbub_bot") is None
