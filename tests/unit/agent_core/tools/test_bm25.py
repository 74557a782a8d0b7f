"""The BM25 ranking behind ``tool_search``."""

from __future__ import annotations

from agent_core.tools.bm25 import BM25, tokenize


def test_tokenize_splits_code_names() -> None:
    assert tokenize("github__create_pull-request listIssues") == [
        "github",
        "create",
        "pull",
        "request",
        "list",
        "issues",
    ]


def test_finds_the_best_document_and_only_matching_ones() -> None:
    docs = [
        "weather forecast for a city",
        "create a pull request on github",
        "list open issues of a github repository",
    ]
    index = BM25(docs)
    assert index.top("open a pull request", 5)[0] == 1
    assert index.top("weather", 5) == [0]
    assert index.top("nothing relevant", 5) == []


def test_a_term_in_most_documents_still_counts() -> None:
    # Okapi's IDF goes negative here (term in 2 of 2 documents); the Lucene IDF does not.
    index = BM25(["github issues", "github pulls"])
    assert all(score > 0 for score in index.scores("github"))
