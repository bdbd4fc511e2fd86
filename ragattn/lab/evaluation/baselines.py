"""Reference systems the attention methods must beat, and the shared budget selector.

Rerankers are callables ``RerankQuery -> {doc_id: score}``; sentence scorers implement
:class:`SentenceScorer`. All scores are "higher is better" and only their order matters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets import Passage, RerankQuery, Span

if TYPE_CHECKING:
    from ragattn.embed import Embedder


# --------------------------------------------------------------------------------- reranking


def first_stage_order(query: RerankQuery) -> dict[str, float]:
    """Keep the first-stage order: score = minus the 1-based first-stage rank."""
    return {c.doc_id: -float(c.first_stage_rank) for c in query.candidates}


def _doc_text(title: str, text: str) -> str:
    return f"{title} {text}" if title else text


class MiniLMRanker:
    """Cosine (in [-1, 1]) of the query and ``title + " " + text`` in the packaged MiniLM."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        if embedder is None:
            from ragattn.embed import shared_embedder

            embedder = shared_embedder()
        self._embedder = embedder

    def __call__(self, query: RerankQuery) -> dict[str, float]:
        texts = [query.query, *(_doc_text(c.title, c.text) for c in query.candidates)]
        vecs = self._embedder.encode(texts)
        sims = vecs[1:] @ vecs[0]
        return {c.doc_id: float(s) for c, s in zip(query.candidates, sims, strict=True)}


# -------------------------------------------------------------------------- sentence selection


@runtime_checkable
class SentenceScorer(Protocol):
    """Scores every sentence of every passage for a question (higher = keep first)."""

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        """Return one float array per passage with one score per ``passage.sentence_spans``."""
        ...


def _sizes(passages: Sequence[Passage]) -> list[int]:
    return [len(p.sentence_spans) for p in passages]


def _unflatten(flat: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in np.split(flat, np.cumsum(sizes)[:-1])]


class RandomScorer:
    """Uniform random scores, reproducible per ``(seed, question)`` whatever the example order."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        digest = hashlib.sha256(f"{self.seed}:{question}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        return [rng.random(n) for n in _sizes(passages)]


class PositionScorer:
    """Earliest first over the whole context: passages in order, sentences in order."""

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        sizes = _sizes(passages)
        return _unflatten(-np.arange(sum(sizes), dtype=np.float64), sizes)


class BM25SentenceScorer:
    """BM25 (bm25s, Lucene idf, English stopwords) of the question over the example's sentences.

    Each example's sentences form their own small corpus, so idf reflects that context only.
    """

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        import bm25s

        sentences = [s for p in passages for s in p.sentences]
        if not sentences:
            return [np.zeros(0) for _ in passages]
        retriever = bm25s.BM25()
        corpus = bm25s.tokenize(sentences, stopwords="en", return_ids=False, show_progress=False)
        retriever.index(corpus, show_progress=False)
        query = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
        flat = np.asarray(retriever.get_scores(query[0]), dtype=np.float64)
        return _unflatten(flat, _sizes(passages))


class MiniLMSentenceScorer:
    """Cosine similarity of the question and each sentence (without title) in MiniLM."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        if embedder is None:
            from ragattn.embed import shared_embedder

            embedder = shared_embedder()
        self._embedder = embedder

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        sentences = [s for p in passages for s in p.sentences]
        vecs = self._embedder.encode([question, *sentences])
        return _unflatten(vecs[1:] @ vecs[0], _sizes(passages))


SENTENCE_BASELINES: dict[str, Callable[[], SentenceScorer]] = {
    "random": RandomScorer,
    "position": PositionScorer,
    "bm25": BM25SentenceScorer,
    "minilm": MiniLMSentenceScorer,
}
"""Sentence-selection baselines by name, each constructible without arguments."""


# --------------------------------------------------------------------------- budget selection


def select_by_budget(
    scores: Sequence[np.ndarray],
    sentence_spans: Sequence[Sequence[Span]],
    token_counts: Sequence[np.ndarray],
    ratio: float,
) -> tuple[tuple[Span, ...], ...]:
    """Keep the best-scored sentences of an example within ``ratio`` of its tokens.

    Rule (skip and continue): the budget is ``ratio * sum(token_counts)`` over all passages;
    sentences are visited by descending score (ties: earlier passage, then earlier sentence) and
    kept when they still fit; one that does not fit is skipped and the next is tried, so the
    budget is filled as far as whole sentences allow. The best sentence is always kept, even
    if it alone exceeds the budget.

    Args:
        scores: per passage, one score per sentence.
        sentence_spans: per passage, the ``[start, end)`` span of each sentence.
        token_counts: per passage, the token count of each sentence (caller's tokenizer).
        ratio: fraction of tokens to keep, ``0 < ratio <= 1``.

    Returns:
        Per passage, the kept spans in text order (possibly empty for a passage).

    Raises:
        InvalidInputError: ``ratio`` outside ``(0, 1]``, mismatched lengths, or no sentences.
    """
    if not 0.0 < ratio <= 1.0:
        raise InvalidInputError(f"ratio must be in (0, 1], got {ratio}")
    if not len(scores) == len(sentence_spans) == len(token_counts):
        raise InvalidInputError(
            "scores, sentence_spans and token_counts need one entry per passage"
        )
    owner: list[tuple[int, int]] = []
    for p, (s, spans, counts) in enumerate(zip(scores, sentence_spans, token_counts, strict=True)):
        if not len(s) == len(spans) == len(counts):
            raise InvalidInputError(
                f"passage {p}: {len(s)} scores, {len(spans)} spans, {len(counts)} token counts"
            )
        owner.extend((p, i) for i in range(len(spans)))
    if not owner:
        raise InvalidInputError("the example has no sentences to select from")
    flat_scores = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    flat_counts = np.concatenate([np.asarray(c, dtype=np.int64) for c in token_counts])
    budget = ratio * float(flat_counts.sum())
    kept: list[list[int]] = [[] for _ in scores]
    used = 0
    for rank, idx in enumerate(np.argsort(-flat_scores, kind="stable")):
        cost = int(flat_counts[idx])
        if rank == 0 or used + cost <= budget:
            p, i = owner[idx]
            kept[p].append(i)
            used += cost
    return tuple(
        tuple(sentence_spans[p][i] for i in sorted(indices)) for p, indices in enumerate(kept)
    )
