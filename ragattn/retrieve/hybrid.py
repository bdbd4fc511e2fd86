"""Hybrid retrieval by weighted reciprocal-rank fusion (RRF) of several retrievers.

Each retriever returns its top ``depth`` hits; a document's fused score is
``sum_r weight_r / (k_rrf + rank_r)`` over the retrievers that returned it (rank 1-based), as in
Cormack et al. (SIGIR 2009) with per-retriever weights. RRF uses ranks only, so BM25 scores and
cosine similarities never need to be put on one scale. ``k_rrf = 60`` is the paper's constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import Hit, Retriever


def rrf_fuse(
    rankings: Mapping[str, list[Hit]],
    *,
    weights: Mapping[str, float],
    k_rrf: float = 60.0,
) -> list[Hit]:
    """Fuse ranked hit lists by weighted RRF; all hits, best first, re-ranked from 1.

    Ties in fused score go to the document with the better single rank, then to the retriever
    listed first, then to the earlier position in that retriever's list, so output is deterministic.
    """
    fused: dict[str, float] = {}
    first: dict[str, Hit] = {}
    order: dict[str, tuple[int, int, int]] = {}
    for r_pos, (name, hits) in enumerate(rankings.items()):
        weight = weights[name]
        for hit in hits:
            fused[hit.doc_id] = fused.get(hit.doc_id, 0.0) + weight / (k_rrf + hit.rank)
            first.setdefault(hit.doc_id, hit)
            key = (hit.rank, r_pos, hit.index)
            if hit.doc_id not in order or key < order[hit.doc_id]:
                order[hit.doc_id] = key
    ranked = sorted(fused, key=lambda doc_id: (-fused[doc_id], order[doc_id]))
    return [
        replace(first[doc_id], score=fused[doc_id], rank=rank)
        for rank, doc_id in enumerate(ranked, start=1)
    ]


class HybridRetriever:
    """Weighted reciprocal-rank fusion over named retrievers (e.g. ``bm25`` and ``dense``).

    Args:
        retrievers: name -> retriever; order matters only for breaking exact ties.
        weights: name -> non-negative weight; default 1.0 for every retriever.
        k_rrf: the RRF constant (larger flattens the advantage of top ranks).
        depth: how many hits to take from each retriever before fusing.

    Raises:
        InvalidInputError: no retrievers, unknown or negative weights, all weights zero,
            ``k_rrf < 0`` or ``depth < 1``.
    """

    def __init__(
        self,
        retrievers: Mapping[str, Retriever],
        *,
        weights: Mapping[str, float] | None = None,
        k_rrf: float = 60.0,
        depth: int = 100,
    ) -> None:
        if not retrievers:
            raise InvalidInputError("HybridRetriever needs at least one retriever")
        weights = dict(weights) if weights is not None else {name: 1.0 for name in retrievers}
        unknown = set(weights) - set(retrievers)
        missing = set(retrievers) - set(weights)
        if unknown or missing:
            raise InvalidInputError(
                f"weights must name exactly the retrievers {sorted(retrievers)}; "
                f"unknown {sorted(unknown)}, missing {sorted(missing)}"
            )
        if any(w < 0 for w in weights.values()) or not any(w > 0 for w in weights.values()):
            raise InvalidInputError(f"weights must be >= 0 with at least one > 0, got {weights}")
        if k_rrf < 0 or depth < 1:
            raise InvalidInputError(f"need k_rrf >= 0 and depth >= 1, got {k_rrf}, {depth}")
        self.retrievers = dict(retrievers)
        self.weights = weights
        self.k_rrf = k_rrf
        self.depth = depth

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The ``k`` best documents by fused score (``Hit.score`` is the RRF sum), best first.

        Raises:
            InvalidInputError: ``k < 1``.
        """
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        depth = max(self.depth, k)
        rankings = {
            name: retriever.search(query, depth)
            for name, retriever in self.retrievers.items()
            if self.weights[name] > 0
        }
        return rrf_fuse(rankings, weights=self.weights, k_rrf=self.k_rrf)[:k]


__all__ = ["HybridRetriever", "rrf_fuse"]
