"""session_search snippets: the identifier searched for comes back whole, as written."""

from __future__ import annotations

from agent_core.sessions.archive_search import SNIPPET_RADIUS, snippet

URL = (
    "https://ci.example.org/chainproj/node/-/jobs/4711/artifacts/file/build/logs/test-9f3a2c1d.log"
)


def test_a_term_longer_than_the_radius_is_whole():
    content = "x " * 200 + f"it failed at {URL}, no idea why " + "y " * 200
    assert len(URL) > SNIPPET_RADIUS
    assert URL in snippet(content, [URL])


def test_the_text_around_the_term_is_kept_and_cut():
    content = "a" * 300 + " needle " + "b" * 300
    found = snippet(content, ["NEEDLE"])
    assert found.startswith("…")
    assert found.endswith("…")
    assert "needle" in found
    assert len(found) <= 2 * SNIPPET_RADIUS + len("needle") + 2


def test_the_term_as_written_wins_over_an_earlier_case_variant():
    content = "LiveCD " + "x" * 400 + " then the liveCD booted"
    assert "the liveCD booted" in snippet(content, ["liveCD"])
    assert snippet("only LIVECD here", ["liveCD"]).startswith("only LIVECD")


def test_the_first_term_asked_for_wins_when_several_are_there_as_written():
    content = "boot " + "x" * 400 + " liveCD"
    assert "liveCD" in snippet(content, ["liveCD", "boot"])
