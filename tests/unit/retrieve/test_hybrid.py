from __future__ import annotations

import pytest

from ragattn.errors import InvalidInputError
from ragattn.retrieve.bm25 import Analyzer, BM25Retriever
from ragattn.retrieve.corpus import Hit
from ragattn.retrieve.hybrid import HybridRetriever, rrf_fuse
from ragattn.types import Document


def _hits(*ids: str) -> list[Hit]:
    return [
        Hit(doc_id=d, score=10.0 - r, rank=r, text=d, index=ord(d[0]))
        for r, d in enumerate(ids, start=1)
    ]


def test_rrf_exact_scores_and_order() -> None:
    fused = rrf_fuse(
        {"a": _hits("x", "y", "z"), "b": _hits("y", "w")}, weights={"a": 1.0, "b": 2.0}, k_rrf=10
    )
    assert [h.doc_id for h in fused] == ["y", "w", "x", "z"]
    assert [h.score for h in fused] == pytest.approx([1 / 12 + 2 / 11, 2 / 12, 1 / 11, 1 / 13])
    assert [h.rank for h in fused] == [1, 2, 3, 4]


def test_rrf_ties_prefer_better_single_rank_then_first_retriever() -> None:
    fused = rrf_fuse({"a": _hits("p", "q"), "b": _hits("q", "p")}, weights={"a": 1.0, "b": 1.0})
    assert [h.doc_id for h in fused] == ["p", "q"]  # equal sums; p is rank 1 in the first retriever


def test_hybrid_weights_select_and_zero_weight_drops(docs: list[Document]) -> None:
    stem = BM25Retriever(docs)
    plain = BM25Retriever(docs, analyzer=Analyzer(stemmer=None))
    hybrid = HybridRetriever({"stem": stem, "plain": plain}, weights={"stem": 1.0, "plain": 0.0})
    # "run" matches only with stemming; the zero-weighted retriever is not even asked
    assert [h.doc_id for h in hybrid.search("run", 5)] == ["running"]
    assert hybrid.search("run", 5)[0].score == pytest.approx(1 / 61)


def test_hybrid_validation(docs: list[Document]) -> None:
    bm25 = BM25Retriever(docs)
    with pytest.raises(InvalidInputError, match=r"unknown \['dense'\], missing \[\]"):
        HybridRetriever({"bm25": bm25}, weights={"bm25": 1.0, "dense": 1.0})
    with pytest.raises(InvalidInputError, match="at least one > 0"):
        HybridRetriever({"bm25": bm25}, weights={"bm25": 0.0})
    with pytest.raises(InvalidInputError, match="at least one retriever"):
        HybridRetriever({})
