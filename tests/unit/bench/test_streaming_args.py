"""``python -m bench.streaming --platforms``: which rounds run, in which order."""

from __future__ import annotations

import argparse

import pytest

from bench.streaming import ROUNDS, platform_list


def test_the_rounds_named_run_in_the_order_given_each_once() -> None:
    assert platform_list("slack, Telegram,slack") == ["slack", "telegram"]


def test_every_platform_has_a_round() -> None:
    assert list(ROUNDS) == ["telegram", "discord", "slack", "webchat"]


@pytest.mark.parametrize("value", ["telegram,nope", "", " , "])
def test_an_unknown_or_empty_list_is_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected platforms among"):
        platform_list(value)
