"""``bm25``: candidates ranked by BM25 over the candidate list itself, no model at all.

Okapi BM25 (k1 = 1.5, b = 0.75, rank-bm25's defaults) of each candidate's ``title + " " + text``
for the query, with the candidates as the corpus, tokenized by :func:`ragattn.lexical.words`:
lower-cased words, and character bigrams in scripts written without spaces (Chinese, Japanese,
Thai, Lao, Khmer, Burmese), so it reads every language alike. The idf is Lucene's,
``ln(1 + (N - n + 0.5) / (n + 0.5))``, positive for every term: rank-bm25's Okapi idf is 0 or
floored for a term in half the candidates or more, so two candidates sharing a query word could
not be told apart. It ranks calls not in English by default (the rule and its numbers:
docs/research/languages.md, "The standalone reranker outside English").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ragattn.lexical import words
from ragattn.rerank.base import DocScores
from ragattn.types import Document

K1 = 1.5
B = 0.75
SCALE = (
    "raw_score: Okapi BM25 (k1 1.5, b 0.75, Lucene's idf) over the candidates themselves, >= 0 "
    "(0 when no query word occurs); relevance_score = raw / the list's best raw (in [0, 1])"
)


def bm25_list(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 of each text for ``query`` with ``texts`` as the corpus (see the module docstring),
    >= 0. Independent of the texts' order to the bit: the corpus statistics are exact sums and
    each text's score sums over the query's terms in the query's order."""
    counts = [Counter(words(t)) for t in texts]
    lengths = [sum(c.values()) for c in counts]
    average = math.fsum(lengths) / max(len(texts), 1) or 1.0
    terms = list(dict.fromkeys(words(query)))
    n = len(texts)
    idf = {t: math.log1p((n - df + 0.5) / (df + 0.5)) for t in terms if (df := _df(t, counts))}
    scores = np.zeros(n, dtype=np.float64)
    for i, (c, length) in enumerate(zip(counts, lengths, strict=True)):
        norm = K1 * (1.0 - B + B * length / average)
        score = 0.0
        for t, weight in idf.items():
            f = c.get(t, 0)
            if f:
                score += weight * f * (K1 + 1.0) / (f + norm)
        scores[i] = score
    return scores


def _df(term: str, counts: Sequence[Counter[str]]) -> int:
    return sum(1 for c in counts if term in c)


class Bm25Scorer:
    """See the module docstring: ``raw`` is BM25 in its own units, ``relevance = raw / max(raw)``
    in [0, 1] (all 0 when no query word occurs). Order-free to the bit; the first-stage order is
    not read."""

    def __init__(self, name: str = "bm25") -> None:
        self.name = name

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores:
        raw = bm25_list(query, [f"{d.title or ''} {d.text}" for d in documents])
        best = float(raw.max()) if len(raw) else 0.0
        relevance = raw / best if best > 0 else np.zeros_like(raw)
        return DocScores(raw=raw, relevance=relevance)


__all__ = ["B", "K1", "SCALE", "Bm25Scorer", "bm25_list"]
