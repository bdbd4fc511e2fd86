from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ragattn.errors import InvalidInputError
from ragattn.retrieve.bm25 import Analyzer, BM25Retriever, top_k_indices
from ragattn.types import Document


def test_analyzer_lowercases_drops_stopwords_and_short_tokens_and_stems() -> None:
    assert Analyzer().tokenize("The Runners were running to a Bakery!") == [
        "runner",
        "were",
        "run",
        "bakeri",
    ]
    assert Analyzer(stemmer=None, stopwords=None).tokenize("The cats, a dog") == [
        "the",
        "cats",
        "dog",
    ]


def test_unknown_stemmer_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="unknown stemmer language 'klingon'"):
        Analyzer(stemmer="klingon").tokenize("x")


@pytest.mark.parametrize("backend", ["bm25s", "rank_bm25"])
def test_exact_ranking_on_hand_built_corpus(docs: list[Document], backend: str) -> None:
    bm25 = BM25Retriever(docs, backend=backend)  # type: ignore[arg-type]
    hits = bm25.search("sleeping cat on a mat", k=10)
    assert [h.doc_id for h in hits] == ["cat"]
    assert hits[0].rank == 1 and hits[0].index == 0 and hits[0].text == docs[0].text
    # stemming: "run" matches "running"/"runners" only in one document
    assert [h.doc_id for h in bm25.search("run", k=3)] == ["running"]
    # the title is indexed too
    assert [h.doc_id for h in bm25.search("vitamin bones", k=3)] == ["vitamin"]
    assert bm25.search("zebra quantum", k=3) == []
    assert bm25.search("the and of", k=3) == []  # only stop words


def test_bm25s_score_matches_lucene_formula() -> None:
    docs = [
        Document(id=str(i), text=t) for i, t in enumerate(["apple apple pear", "pear plum", "plum"])
    ]
    bm25 = BM25Retriever(docs, analyzer=Analyzer(stemmer=None), k1=1.2, b=0.75)
    hit = bm25.search("apple", k=1)[0]
    n, df, tf, dl, avgdl = 3, 1, 2, 3, 2.0
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    # Lucene's BM25 drops the constant (k1 + 1) numerator factor: same ranking, smaller scores
    expected = idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert hit.doc_id == "0"
    assert hit.score == pytest.approx(expected, rel=1e-5)


def test_backends_agree_on_order(docs: list[Document]) -> None:
    a = BM25Retriever(docs, backend="bm25s").search("bread dough bake sourdough cat", k=5)
    b = BM25Retriever(docs, backend="rank_bm25").search("bread dough bake sourdough cat", k=5)
    assert [h.doc_id for h in a] == [h.doc_id for h in b] == ["bread", "cat"]


def test_top_k_ties_go_to_lower_index_and_zeros_are_dropped() -> None:
    scores = np.array([0.5, 2.0, 0.5, 0.0, 2.0, 0.5], dtype=np.float32)
    assert top_k_indices(scores, 4).tolist() == [1, 4, 0, 2]
    assert top_k_indices(scores, 100).tolist() == [1, 4, 0, 2, 5]


def test_errors(docs: list[Document]) -> None:
    with pytest.raises(
        InvalidInputError,
        match=re.escape("unknown BM25 backend 'lucene'; choose one of ('bm25s', 'rank_bm25')"),
    ):
        BM25Retriever(docs, backend="lucene")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="over no documents"):
        BM25Retriever([])
    with pytest.raises(InvalidInputError, match="k must be at least 1, got 0"):
        BM25Retriever(docs).search("cat", k=0)
