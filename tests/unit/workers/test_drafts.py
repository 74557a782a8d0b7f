"""The draft coalescer: interval, word boundaries, no no-op calls, overflow into a new message."""

from __future__ import annotations

import itertools

import pytest

from workers.drafts import DraftAction, DraftCall, DraftCoalescer, whole_words


def _drive(coalescer: DraftCoalescer, texts: list[tuple[float, str]]) -> list[DraftCall]:
    """Feed (time, text so far) pairs; every call is made and succeeds at once."""
    made = []
    for now, text in texts:
        call = coalescer.next_call(text, now)
        if call is not None:
            coalescer.done(call, now)
            made.append(call)
    return made


class TestWholeWords:
    @pytest.mark.parametrize(
        ("text", "shown"),
        [
            ("", ""),
            ("Hel", ""),
            ("Hello ", "Hello"),
            ("Hello wor", "Hello"),
            ("Hello world\n", "Hello world"),
            ("line one\nsec", "line one"),
        ],
    )
    def test_shows_only_complete_words(self, text: str, shown: str) -> None:
        assert whole_words(text) == shown


class TestCoalescer:
    def test_first_word_is_posted_at_once_then_one_call_per_interval(self) -> None:
        coalescer = DraftCoalescer(interval=1.5, limit=4096)
        stream = [(t / 10, "word " * (t + 1)) for t in range(40)]  # 10 words a second

        times = []
        calls = []
        for now, text in stream:
            call = coalescer.next_call(text, now)
            if call is not None:
                coalescer.done(call, now)
                times.append(now)
                calls.append(call)

        assert calls[0] == DraftCall(DraftAction.POST, 0, "word")
        assert [c.action for c in calls[1:]] == [DraftAction.EDIT] * (len(calls) - 1)
        assert all(b - a >= 1.5 for a, b in itertools.pairwise(times))
        assert len(calls) == 3  # t=0, 1.5, 3.0 within 3.9 s

    def test_never_calls_for_text_that_shows_nothing_new(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=4096)

        calls = _drive(coalescer, [(0, "Hello "), (1, "Hello wo"), (2, "Hello wor"), (3, "Hello ")])

        assert calls == [DraftCall(DraftAction.POST, 0, "Hello")]

    def test_nothing_before_the_first_whole_word(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=4096)

        assert coalescer.next_call("Hel", 0) is None

    def test_a_reply_past_the_limit_continues_in_a_new_message(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=20)
        words = "alpha beta gamma delta epsilon zeta eta theta "
        stream = [(float(i), words[: i + 1]) for i in range(len(words))]

        calls = _drive(coalescer, stream)

        assert all(len(c.text) <= 20 for c in calls)
        posts = [c for c in calls if c.action is DraftAction.POST]
        assert [c.part for c in posts] == [0, 1, 2]
        assert coalescer.shown == ["alpha beta gamma", "delta epsilon zeta", "eta theta"]
        # Every call shows whole words only.
        assert all(set(c.text.split()) <= set(words.split()) for c in calls)

    def test_earlier_message_is_finished_before_the_next_is_posted(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=11)
        coalescer.done(DraftCall(DraftAction.POST, 0, "aaa"), 0)

        first = coalescer.next_call("aaa bbb ccc ddd ", 1)

        assert first == DraftCall(DraftAction.EDIT, 0, "aaa bbb ccc")

    def test_the_measure_counts_as_the_platform_does(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=10, measure=lambda s: 2 * len(s))

        calls = _drive(coalescer, [(0, "abcd efgh ij ")])

        assert calls == [DraftCall(DraftAction.POST, 0, "abcd")]

    def test_hold_waits_out_a_rate_limit(self) -> None:
        coalescer = DraftCoalescer(interval=1, limit=4096)
        coalescer.hold(5, now=0)

        assert coalescer.next_call("Hello ", 4.9) is None
        assert coalescer.next_call("Hello ", 5) == DraftCall(DraftAction.POST, 0, "Hello")

    def test_resumed_messages_are_edited_not_posted_again(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=4096, posted=1)

        call = coalescer.next_call("Hello again ", 0)

        assert call == DraftCall(DraftAction.EDIT, 0, "Hello again")

    def test_an_unfinished_last_word_is_left_to_the_final_delivery(self) -> None:
        coalescer = DraftCoalescer(interval=0, limit=4096)
        calls = _drive(coalescer, [(0, "All "), (1, "All done.")])

        assert [c.text for c in calls] == ["All"]

    @pytest.mark.parametrize(
        ("interval", "limit", "message"),
        [(-1, 10, "`interval` must not be negative"), (1, 0, "`limit` must be at least 1")],
    )
    def test_bad_settings_are_refused(self, interval: float, limit: int, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            DraftCoalescer(interval=interval, limit=limit)


def test_the_final_edit_waits_out_the_interval() -> None:
    coalescer = DraftCoalescer(interval=1.5, limit=4096)
    assert coalescer.wait_seconds(0) == 0
    coalescer.done(DraftCall(DraftAction.POST, 0, "Hello"), 10)

    assert coalescer.wait_seconds(10.5) == pytest.approx(1.0)
    assert coalescer.wait_seconds(12) == 0


def test_a_hold_keeps_drafts_back_but_not_the_final_edit() -> None:
    """A draft skipped for a minute (its share of a per-minute limit spent) is no reason to
    keep the final text back for that minute: the final takes its own slot."""
    coalescer = DraftCoalescer(interval=1, limit=4096)
    coalescer.done(DraftCall(DraftAction.POST, 0, "Hello"), 10)
    coalescer.hold(58, now=11)

    assert coalescer.next_call("Hello there ", 12) is None, "drafts wait out the hold"
    assert coalescer.wait_seconds(10.5) == pytest.approx(0.5), "the interval still counts"
    assert coalescer.wait_seconds(12) == 0, "the final edit does not wait for the hold"
