"""BM25 ranking over a handful of short documents (the deferred tool catalogue).

A short implementation rather than a dependency: the corpus is tens of tools rebuilt every
turn, where ``rank-bm25``'s Okapi variant gives terms found in more than half the
documents a negative or floored weight (a two-tool catalogue then ranks nothing) and
``bm25s`` brings numpy and scipy for sparse matrices this size never needs. This is
Okapi BM25 with the always-positive Lucene IDF, ``log(1 + (N - n + 0.5) / (n + 0.5))``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def tokenize(text: str) -> list[str]:
    """Lower-cased words; ``snake_case``, ``kebab-case`` and ``camelCase`` split into words."""
    return [word.lower() for word in _WORD.findall(_CAMEL.sub(" ", text))]


class BM25:
    """Scores a query against a fixed list of documents.

    Args:
        documents: the texts to rank, in the order results refer to.
    """

    def __init__(self, documents: Sequence[str]) -> None:
        self._docs = [Counter(tokenize(doc)) for doc in documents]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        count = len(self._docs)
        self._average = (sum(self._lengths) / count) if count else 0.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        self._idf = {
            term: math.log(1 + (count - n + 0.5) / (n + 0.5)) for term, n in frequency.items()
        }

    def scores(self, query: str) -> list[float]:
        """One score per document; 0 for documents sharing no term with the query."""
        terms = tokenize(query)
        out: list[float] = []
        for doc, length in zip(self._docs, self._lengths, strict=True):
            norm = K1 * (1 - B + B * length / self._average) if self._average else K1
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (K1 + 1) / (tf + norm)
            out.append(score)
        return out

    def top(self, query: str, limit: int) -> list[int]:
        """Indices of the best matching documents, best first; only those that match."""
        scored = [(s, i) for i, s in enumerate(self.scores(query)) if s > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [i for _, i in scored[:limit]]
