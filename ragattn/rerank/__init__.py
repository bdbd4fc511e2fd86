"""Reranking: the :class:`Reranker` facade and the registry of scoring methods."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragattn.assets import default_models_dir, proxy_slug
from ragattn.attention import HeadSet
from ragattn.errors import InvalidInputError
from ragattn.proxy import DEFAULT_PROXY, Proxy, load_proxy
from ragattn.rerank.base import DocScores, Scorer
from ragattn.rerank.dense import DenseScorer
from ragattn.rerank.fusion import FusedScorer, RerankProfile, profile_path
from ragattn.rerank.icr import AttentionMemo, IcrScorer
from ragattn.rerank.retrieval_profile import RetrievalHeadProfile, retrieval_profile_path
from ragattn.types import DocumentLike, RerankResult, RerankResults, as_documents

ScorerFactory = Callable[[Proxy, AttentionMemo | None], Scorer]


def _profile(proxy: Proxy) -> RerankProfile:
    return RerankProfile.load(profile_path(default_models_dir(), proxy_slug(proxy)))


def _retrieval_heads(proxy: Proxy) -> HeadSet:
    """Wu et al. retrieval heads from ``models/<proxy>/retrieval-heads.json`` (``ragattn heads
    detect``), checked against the proxy's geometry."""
    path = retrieval_profile_path(default_models_dir(), proxy_slug(proxy))
    heads = RetrievalHeadProfile.load(path).heads
    heads.validate(proxy.num_layers, proxy.num_heads)
    return heads


METHODS: dict[str, ScorerFactory] = {
    "icr": lambda p, m: IcrScorer(p, heads="all", name="icr", memo=m),
    "icr-uncalibrated": lambda p, m: IcrScorer(
        p, heads="all", calibrate=False, name="icr-uncalibrated", memo=m
    ),
    "icr-middle": lambda p, m: IcrScorer(p, heads="middle", name="icr-middle", memo=m),
    "icr-middle-reattn": lambda p, m: IcrScorer(
        p, heads="middle", idf=True, entropy_lambda=0.5, name="icr-middle-reattn", memo=m
    ),
    "icr-two-orders": lambda p, m: IcrScorer(p, heads="all", orders=2, name="icr-two-orders"),
    "icr-query-first": lambda p, m: IcrScorer(
        p, heads="all", query_first=True, name="icr-query-first"
    ),
    "icr-pointwise": lambda p, m: IcrScorer(
        p, heads="all", docs_per_window=1, name="icr-pointwise"
    ),
    "qrhead": lambda p, m: IcrScorer(p, heads=_profile(p).heads, name="qrhead", memo=m),
    "qrhead-reattn": lambda p, m: IcrScorer(
        p, heads=_profile(p).heads, idf=True, entropy_lambda=0.5, name="qrhead-reattn", memo=m
    ),
    "icr-retrieval": lambda p, m: IcrScorer(
        p, heads=_retrieval_heads(p), name="icr-retrieval", memo=m
    ),
    "icr-retrieval-reattn": lambda p, m: IcrScorer(
        p,
        heads=_retrieval_heads(p),
        idf=True,
        entropy_lambda=0.5,
        name="icr-retrieval-reattn",
        memo=m,
    ),
    "fused": lambda p, m: FusedScorer(p, _profile(p), attention=True, name="fused", memo=m),
    "minilm": lambda p, m: DenseScorer(),
    "fused-no-attention": lambda p, m: FusedScorer(
        p, _profile(p), attention=False, name="fused-no-attention"
    ),
}
"""Scoring methods by name; each factory builds a scorer on a loaded proxy."""

DEFAULT_METHOD = "fused-no-attention"
"""The best measured configuration (BENCHMARKS.md §2, DL19 top-20 nDCG@10): the learned fusion of
candidate-local BM25, MiniLM and the first-stage rank, 0.5934, against 0.5411 with the QRHead
attention feature added and 0.5020 for calibrated ICR. At 135M the attention signal does not pay
on DL19 yet; the attention methods stay selectable by name."""


def resolve_proxy(proxy: str | Proxy, **load_kwargs: Any) -> Proxy:
    return proxy if isinstance(proxy, Proxy) else load_proxy(proxy, **load_kwargs)


def validate_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    return query


class Reranker:
    """Reranks candidate documents for a query with the attention of a small proxy LLM.

    Args:
        proxy: a loaded :class:`Proxy` or a name/path for :func:`ragattn.proxy.load_proxy`
            (default: the packaged SmolLM2-135M).
        method: a key of :data:`METHODS` (default: the best measured configuration).
        dtype, threads: passed to :func:`load_proxy` when ``proxy`` is a name.
        memo: share one all-heads capture between rerankers scoring the same lists (evaluations).
    """

    def __init__(
        self,
        proxy: str | Proxy = DEFAULT_PROXY,
        *,
        method: str = DEFAULT_METHOD,
        dtype: str = "float32",
        threads: int | None = None,
        memo: AttentionMemo | None = None,
    ) -> None:
        if method not in METHODS:
            raise InvalidInputError(
                f"unknown rerank method {method!r}; valid: {', '.join(sorted(METHODS))}"
            )
        self.proxy = resolve_proxy(proxy, dtype=dtype, threads=threads)
        self.method = method
        self.scorer = METHODS[method](self.proxy, memo)

    def score(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        first_stage_order: Sequence[int] | None = None,
    ) -> DocScores:
        """Scores aligned with ``documents`` (no sorting); see :meth:`rerank`."""
        query = validate_query(query)
        docs = as_documents(documents)
        if not docs:
            raise InvalidInputError("documents must hold at least one document")
        order = list(range(len(docs))) if first_stage_order is None else list(first_stage_order)
        if sorted(order) != list(range(len(docs))):
            raise InvalidInputError(
                "first_stage_order must be a permutation of the document indices"
            )
        return self.scorer.score(query, docs, order)

    def rerank(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        first_stage_order: Sequence[int] | None = None,
    ) -> RerankResults:
        """Rerank ``documents`` for ``query``.

        Args:
            query: the question or search query (non-empty).
            documents: strings, :class:`~ragattn.types.Document` s or mappings with ``text``
                (and optional ``id``, ``title``).
            top_n: return only the best ``top_n`` (default: all); at most ``len(documents)``.
            first_stage_order: the first stage's ranking (indices, best first); default: input
                order. The best first-stage document is placed nearest the query.

        Returns:
            Results in descending relevance; ties keep input order. ``index`` is the input position.

        Raises:
            InvalidInputError: empty query, no documents, a malformed document, or ``top_n < 1``.
        """
        if top_n is not None and (not isinstance(top_n, int) or top_n < 1):
            raise InvalidInputError("top_n must be a positive integer")
        docs = as_documents(documents)
        scores = self.score(query, docs, first_stage_order=first_stage_order)
        order = sorted(range(len(docs)), key=lambda i: (-scores.raw[i], i))
        results = [
            RerankResult(
                index=i,
                relevance_score=float(np.clip(scores.relevance[i], 0.0, 1.0)),
                raw_score=float(scores.raw[i]),
                document=docs[i],
            )
            for i in order
        ]
        if top_n is not None:
            results = results[:top_n]
        return RerankResults(
            results, warnings=scores.warnings, method=self.method, windows=scores.windows
        )


__all__ = ["DEFAULT_METHOD", "METHODS", "Reranker"]
