"""The lexical signal over a small set of texts, shared by rerank and compress.

Both the fused reranker (candidate documents) and the sentence probes (sentences of the context)
score texts against the query with BM25 (Okapi, rank-bm25), the given texts as the corpus (no
corpus statistics), divided by its maximum: in [0, 1], all 0 when no query word occurs. Their
dense signal, MiniLM's cosine, lives with the embedder (:func:`ragattn.embed.dense_scores`,
:func:`ragattn.embed.document_cosines`).

``sigmoid`` is the logistic map the learned fusions and probes apply to their log-odds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
)
"""Scripts written without spaces between words: their runs are counted as character bigrams."""
_TOKEN = re.compile(f"[{_UNSPACED}]+|[^\\W{_UNSPACED}]+", re.UNICODE)
_RUN = re.compile(f"[{_UNSPACED}]")


def words(text: str) -> list[str]:
    """The tokens BM25 counts in ``text``: lower-cased ``\\w+`` words, and in scripts written
    without spaces (Chinese, Japanese, Thai, Lao, Khmer, Burmese) each run's overlapping
    character bigrams (a one-character run is itself), the usual BM25 units where no word
    boundary is written."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group().lower()
        if _RUN.match(token) and len(token) > 1:
            out.extend(token[i : i + 2] for i in range(len(token) - 1))
        else:
            out.append(token)
    return out


def bm25_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 (Okapi, rank-bm25) of each text for the query, over ``texts`` as the corpus, divided by
    the maximum (so in [0, 1]; all 0 when nothing matches)."""
    from rank_bm25 import BM25Okapi

    # rank-bm25 sums idf over a dict in corpus order, so its scores move in the last bit with the
    # order of the texts; a canonical order (by text) makes them order-free to the bit.
    order = sorted(range(len(texts)), key=lambda i: texts[i])
    corpus = [words(texts[i]) or ["_"] for i in order]
    scores = np.empty(len(texts), dtype=np.float64)
    scores[order] = np.asarray(BM25Okapi(corpus).get_scores(words(query)), dtype=np.float64)
    scores = np.clip(scores, 0.0, None)
    top = scores.max() if len(scores) else 0.0
    return scores / top if top > 0 else scores


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic map, for scores that are log-odds; values in [0, 1]."""
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64))))


__all__ = ["bm25_scores", "sigmoid", "words"]
