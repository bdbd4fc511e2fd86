from __future__ import annotations

import numpy as np
import pytest

from ragattn.embed import Embedder
from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import indexable_text
from ragattn.retrieve.dense import DenseRetriever
from ragattn.types import Document


def test_semantic_match_without_shared_words(docs: list[Document], embedder: Embedder) -> None:
    dense = DenseRetriever(docs, embedder=embedder)
    assert dense.kind == "flat"
    assert dense.search("a kitten resting on a rug", k=1)[0].doc_id == "cat"
    assert dense.search("equities dropped on Wall Street", k=1)[0].doc_id == "market"


def test_scores_are_cosines_and_order_is_exact(docs: list[Document], embedder: Embedder) -> None:
    dense = DenseRetriever(docs, embedder=embedder)
    query = "baking a loaf at home"
    hits = dense.search(query, k=len(docs))
    vecs = embedder.encode([indexable_text(d) for d in docs])
    cos = vecs @ embedder.encode([query])[0]
    assert [h.index for h in hits] == np.argsort(-cos).tolist()
    assert [h.score for h in hits] == pytest.approx(sorted(cos.tolist(), reverse=True), abs=1e-5)
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]


def test_hnsw_above_exact_max_finds_the_same_top_hits(
    docs: list[Document], embedder: Embedder
) -> None:
    vecs = embedder.encode([indexable_text(d) for d in docs])
    flat = DenseRetriever(docs, embedder=embedder, vectors=vecs)
    hnsw = DenseRetriever(docs, embedder=embedder, vectors=vecs, exact_max=2)
    assert hnsw.kind == "hnsw" and hnsw.config()["index"] == "hnsw"
    for query in ("kitten", "bank shares", "bone health"):
        assert [h.doc_id for h in hnsw.search(query, 3)] == [
            h.doc_id for h in flat.search(query, 3)
        ]


def test_k_larger_than_corpus_and_errors(docs: list[Document], embedder: Embedder) -> None:
    dense = DenseRetriever(docs, embedder=embedder)
    assert len(dense.search("anything", k=50)) == len(docs)
    with pytest.raises(InvalidInputError, match="k must be at least 1"):
        dense.search("x", k=0)
    with pytest.raises(
        InvalidInputError, match=r"vectors must have shape \(5, 384\), got \(2, 384\)"
    ):
        DenseRetriever(docs, embedder=embedder, vectors=np.zeros((2, 384), dtype=np.float32))
    with pytest.raises(InvalidInputError, match="over no documents"):
        DenseRetriever([], embedder=embedder)
