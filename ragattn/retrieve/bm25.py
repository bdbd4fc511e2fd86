"""BM25 lexical retrieval with two interchangeable backends: ``bm25s`` (default) and ``rank_bm25``.

Both backends see exactly the same tokens from one :class:`Analyzer`: lower-case, the regex
``\\b\\w\\w+\\b`` (Unicode words of two or more characters, as scikit-learn and bm25s split),
Lucene's English stop words (the list bm25s ships as ``bm25s.stopwords.STOPWORDS_EN``) and, by
default, the Snowball English stemmer from PyStemmer. They differ only in the IDF formula:

* ``bm25s`` (``method="lucene"``): ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and, as in
  Lucene, no ``(k1 + 1)`` factor in the term-frequency part (same ranking); sparse
  precomputed scores, a query costs one sparse-row sum (milliseconds at 100k documents).
* ``rank_bm25`` (``BM25Okapi``): ``idf = ln((N - df + 0.5) / (df + 0.5))`` with negative values
  floored at ``0.25 * mean idf``; scores every document in Python per query term (tenths of a
  second at 100k documents). Kept selectable as the design's original choice.

``bm25s`` is the default because it measured far faster (see ``docs/benchmarks/retrieval.md``).
Documents that share no term with the query score 0 and are not returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragattn._optional import require
from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import Hit, indexable_text
from ragattn.types import Document

Backend = Literal["bm25s", "rank_bm25"]
BACKENDS: tuple[Backend, ...] = ("bm25s", "rank_bm25")
DEFAULT_BACKEND: Backend = "bm25s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Analyzer:
    """Text to BM25 terms; shared by indexing and querying and by both backends.

    Attributes:
        pattern: regex whose matches (after lower-casing) are the raw tokens.
        stopwords: ``"en"`` for Lucene's English stop list, or ``None`` to keep every token.
        stemmer: a Snowball language for PyStemmer (``"english"``), or ``None`` for no stemming.
    """

    pattern: str = r"(?u)\b\w\w+\b"
    stopwords: Literal["en"] | None = "en"
    stemmer: str | None = "english"

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "stopwords": self.stopwords, "stemmer": self.stemmer}

    def tokenize(self, text: str) -> list[str]:
        """Return the terms of ``text`` in order (repeats kept: term frequency matters)."""
        return _compiled(self).tokenize(text)


class _CompiledAnalyzer:
    def __init__(self, analyzer: Analyzer) -> None:
        self._regex = re.compile(analyzer.pattern)
        self._stop: frozenset[str] = frozenset()
        if analyzer.stopwords == "en":
            self._stop = frozenset(require("bm25s.stopwords", extra="retrieve").STOPWORDS_EN)
        elif analyzer.stopwords is not None:
            raise InvalidInputError(f"unknown stopwords {analyzer.stopwords!r}; use 'en' or None")
        self._stem: Any = None
        if analyzer.stemmer is not None:
            stemmer_mod = require("Stemmer", extra="retrieve")
            try:
                self._stem = stemmer_mod.Stemmer(analyzer.stemmer).stemWords
            except KeyError as exc:
                raise InvalidInputError(
                    f"unknown stemmer language {analyzer.stemmer!r}; use one of "
                    f"{sorted(stemmer_mod.algorithms())} or None"
                ) from exc

    def tokenize(self, text: str) -> list[str]:
        tokens = [t for t in self._regex.findall(text.lower()) if t not in self._stop]
        return list(self._stem(tokens)) if self._stem is not None and tokens else tokens


_ANALYZERS: dict[Analyzer, _CompiledAnalyzer] = {}


def _compiled(analyzer: Analyzer) -> _CompiledAnalyzer:
    compiled = _ANALYZERS.get(analyzer)
    if compiled is None:
        compiled = _ANALYZERS[analyzer] = _CompiledAnalyzer(analyzer)
    return compiled


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest positive scores, best first, ties broken by lower index."""
    positive = int(np.count_nonzero(scores > 0))
    k = min(k, positive)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < len(scores):
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.arange(len(scores))
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


class BM25Retriever:
    """BM25 over a fixed list of documents (title + text), with a selectable backend.

    Args:
        documents: the corpus; ids must be set and unique (see ``corpus.with_ids``).
        backend: ``"bm25s"`` (default, fast) or ``"rank_bm25"``.
        k1: term-frequency saturation.
        b: document-length normalisation in [0, 1].
        analyzer: tokenisation shared by index and queries.
        show_progress: show bm25s's progress bar while indexing.

    Raises:
        InvalidInputError: unknown backend, no documents, no searchable word in any document
            (bm25s fails on an empty vocabulary, and rank_bm25 would build an index that never
            matches), or invalid ``k1`` / ``b``.
        MissingDependencyError: the backend, bm25s stop words or PyStemmer are not installed.
    """

    def __init__(
        self,
        documents: Sequence[Document],
        *,
        backend: Backend = DEFAULT_BACKEND,
        k1: float = 1.5,
        b: float = 0.75,
        analyzer: Analyzer | None = None,
        show_progress: bool = False,
    ) -> None:
        self._configure(documents, backend=backend, k1=k1, b=b, analyzer=analyzer)
        tokens = self._tokens()
        if not any(tokens):
            raise InvalidInputError(
                f"no searchable word in the {len(tokens)} document(s): every word is a stop word, "
                "one character long or punctuation, so BM25 has nothing to index; add documents "
                "with words to search"
            )
        self._model: Any = self._build(tokens, show_progress)

    def _configure(
        self,
        documents: Sequence[Document],
        *,
        backend: Backend,
        k1: float,
        b: float,
        analyzer: Analyzer | None,
    ) -> None:
        if backend not in BACKENDS:
            raise InvalidInputError(f"unknown BM25 backend {backend!r}; choose one of {BACKENDS}")
        if not documents:
            raise InvalidInputError("cannot build a BM25 index over no documents; add documents")
        if k1 < 0 or not 0 <= b <= 1:
            raise InvalidInputError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.documents = tuple(documents)
        self.backend: Backend = backend
        self.k1 = k1
        self.b = b
        self.analyzer = analyzer or Analyzer()

    def _tokens(self) -> list[list[str]]:
        # No bar of our own while tokenising (tqdm is a lab dependency); bm25s shows its own while
        # indexing, and the dense encoder its own.
        return [self.analyzer.tokenize(indexable_text(d)) for d in self.documents]

    def _build(self, tokens: list[list[str]], show_progress: bool) -> Any:
        if self.backend == "rank_bm25":
            rank_bm25 = require("rank_bm25", extra="retrieve")
            # rank_bm25 divides by the mean length; a document of stop words must not crash it.
            return rank_bm25.BM25Okapi([t or [""] for t in tokens], k1=self.k1, b=self.b)
        bm25s = require("bm25s", extra="retrieve")
        model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        model.index(tokens, show_progress=show_progress)
        return model

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float32, length = number of documents)."""
        terms = self.analyzer.tokenize(query)
        if self.backend == "rank_bm25":
            return np.asarray(self._model.get_scores(terms), dtype=np.float32)
        ids = self._model.get_tokens_ids(terms)
        if not ids:
            return np.zeros(len(self.documents), dtype=np.float32)
        return np.asarray(self._model.get_scores_from_ids(ids), dtype=np.float32)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The ``k`` best documents with a positive BM25 score, best first.

        Raises:
            InvalidInputError: ``k < 1``.
        """
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        scores = self.scores(query)
        return [
            Hit(
                doc_id=str(self.documents[i].id),
                score=float(scores[i]),
                rank=rank,
                text=self.documents[i].text,
                title=self.documents[i].title,
                index=int(i),
            )
            for rank, i in enumerate(top_k_indices(scores, k), start=1)
        ]

    def config(self) -> dict[str, Any]:
        """Parameters needed to rebuild or reload this retriever (written to index manifests)."""
        return {
            "backend": self.backend,
            "k1": self.k1,
            "b": self.b,
            "analyzer": self.analyzer.to_dict(),
        }

    def save(self, directory: Path) -> None:
        """Persist the bm25s sparse index under ``directory`` (rank_bm25 is rebuilt on load)."""
        if self.backend == "bm25s":
            self._model.save(str(directory), show_progress=False)

    @classmethod
    def load(
        cls, directory: Path, documents: Sequence[Document], config: dict[str, Any]
    ) -> BM25Retriever:
        """Reload a retriever saved with :meth:`save` and described by :meth:`config`."""
        self = cls.__new__(cls)
        self._configure(
            documents,
            backend=config["backend"],
            k1=config["k1"],
            b=config["b"],
            analyzer=Analyzer(**config["analyzer"]),
        )
        if self.backend == "bm25s":
            bm25s = require("bm25s", extra="retrieve")
            self._model = bm25s.BM25.load(str(directory), show_progress=False)
        else:
            self._model = self._build(self._tokens(), show_progress=False)
        return self


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Analyzer", "BM25Retriever", "top_k_indices"]
