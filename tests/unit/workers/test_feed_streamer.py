"""The web chat's streamer: whole words, one draft per interval, never the same text twice."""

from __future__ import annotations

from workers.streaming import FeedStreamer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_drafts_are_whole_words_paced_and_never_repeated() -> None:
    published: list[tuple[str, int | str, str]] = []
    clock = _Clock()
    streamer = FeedStreamer(
        lambda *draft: published.append(draft), "conv-1", 7, interval=0.5, clock=clock
    )

    streamer("Hel")  # no whole word yet
    streamer("Hello wor")  # the first draft goes out at once
    clock.now += 0.2
    streamer("Hello world and")  # inside the interval: waits
    clock.now += 0.4
    streamer("Hello world and")
    clock.now += 1.0
    streamer("Hello world an")  # the same whole words: nothing new to show

    assert published == [("conv-1", 7, "Hello"), ("conv-1", 7, "Hello world")]
