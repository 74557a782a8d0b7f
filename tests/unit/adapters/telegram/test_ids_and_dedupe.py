"""Bot-wide message ids and the recent-update window."""

from __future__ import annotations

import pytest

from adapters.telegram.dedupe import RecentUpdates
from adapters.telegram.ids import compose_message_id, parse_message_id


class TestMessageIds:
    @pytest.mark.parametrize(
        ("chat_id", "message_id", "composed"),
        [(111, 5, "111:5"), (-1001234567890, 77, "-1001234567890:77"), ("-42", 1, "-42:1")],
    )
    def test_round_trip(self, chat_id: int | str, message_id: int, composed: str) -> None:
        assert compose_message_id(chat_id, message_id) == composed
        assert parse_message_id(composed) == (str(chat_id), message_id)

    @pytest.mark.parametrize("bad", ["", "77", ":77", "-100:", "-100:x", "a:b:c"])
    def test_refuses_other_ids(self, bad: str) -> None:
        with pytest.raises(ValueError, match="not a Telegram message id"):
            parse_message_id(bad)


class TestRecentUpdates:
    def test_second_claim_of_the_same_update_fails(self) -> None:
        recent = RecentUpdates()
        assert recent.begin(1)
        assert not recent.begin(1), "in flight"
        recent.finish(1)
        assert not recent.begin(1), "done"
        assert 1 in recent

    def test_abandoned_update_can_be_handled_again(self) -> None:
        recent = RecentUpdates()
        assert recent.begin(7)
        recent.abandon(7)
        assert recent.begin(7)

    def test_oldest_ids_are_forgotten_beyond_capacity(self) -> None:
        recent = RecentUpdates(capacity=3)
        for update_id in range(5):
            assert recent.begin(update_id)
            recent.finish(update_id)
        assert [i in recent for i in range(5)] == [False, False, True, True, True]

    def test_capacity_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="positive"):
            RecentUpdates(capacity=0)
