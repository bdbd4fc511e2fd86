"""Property tests (hypothesis) of the library API: Reranker and Compressor invariants.

The invariants hold for every method, so most examples use the defaults (no attention forward:
cheap); a few examples run an attention method on the packaged proxy. Example counts are small
because model calls are slow on a shared CPU; ``deadline=None`` for the same reason.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

WORDS = [
    "Paris",
    "capital",
    "France",
    "river",
    "Seine",
    "banana",
    "potassium",
    "Rome",
    "the",
    "is",
    "of",
    "a",
    "city",
    "東京",
    "首都",
    "مدينة",
    "🙂",
    "e\u0301",
    "42",
    "1.5",
]
sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(
    lambda ws: " ".join(ws) + "."
)
documents = st.lists(sentences, min_size=1, max_size=3).map(" ".join)
doc_lists = st.lists(documents, min_size=1, max_size=6)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
# Free text too: any non-empty string the tokenizer can encode (no lone surrogates).
free_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=60
).filter(lambda s: s.strip())


def bounded(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@pytest.fixture(scope="module")
def default_reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy)


@pytest.fixture(scope="module")
def icr_reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy, method="icr")


@pytest.fixture(scope="module")
def default_compressor(proxy: Any) -> Any:
    from ragattn.compress import Compressor

    return Compressor(proxy)


def _check_ranking(results: Any, n_docs: int, top_n: int | None) -> None:
    indices = [r.index for r in results]
    expected_len = n_docs if top_n is None else min(top_n, n_docs)
    assert len(results) == expected_len
    assert len(set(indices)) == len(indices)
    assert set(indices) <= set(range(n_docs))
    if top_n is None:
        assert sorted(indices) == list(range(n_docs))  # a permutation of the inputs
    for r in results:
        assert math.isfinite(r.relevance_score) and 0.0 <= r.relevance_score <= 1.0
        assert math.isfinite(r.raw_score)
    raws = [r.raw_score for r in results]
    assert raws == sorted(raws, reverse=True)


@bounded(25)
@given(query=st.one_of(queries, free_text), docs=doc_lists, top_n=st.none() | st.integers(1, 8))
def test_default_rerank_is_a_ranked_permutation(
    default_reranker: Any, query: str, docs: list[str], top_n: int | None
) -> None:
    first = default_reranker.rerank(query, docs, top_n=top_n)
    _check_ranking(first, len(docs), top_n)
    again = default_reranker.rerank(query, docs, top_n=top_n)
    assert [(r.index, r.relevance_score) for r in again] == [
        (r.index, r.relevance_score) for r in first
    ]


@bounded(4)
@given(query=queries, docs=doc_lists, top_n=st.none() | st.integers(1, 8))
def test_attention_rerank_is_a_ranked_permutation(
    icr_reranker: Any, query: str, docs: list[str], top_n: int | None
) -> None:
    first = icr_reranker.rerank(query, docs, top_n=top_n)
    _check_ranking(first, len(docs), top_n)
    again = icr_reranker.rerank(query, docs, top_n=top_n)
    assert [(r.index, r.raw_score) for r in again] == [(r.index, r.raw_score) for r in first]


@bounded(20)
@given(query=queries, docs=doc_lists, ratio=st.floats(0.05, 1.0))
def test_compress_keeps_exact_substrings_under_the_budget(
    default_compressor: Any, query: str, docs: list[str], ratio: float
) -> None:
    out = default_compressor.compress(query, docs, ratio=ratio)
    assert sorted(d.index for d in out.documents) == list(range(len(docs)))
    for d in out.documents:
        text = docs[d.index]
        for span in d.kept_spans:
            assert 0 <= span.start < span.end <= len(text)
            assert text[span.start : span.end] == span.text
            assert math.isfinite(span.score)
        assert all(math.isfinite(s) for s in d.sentence_scores)
    assert 0 <= out.compressed_tokens <= out.origin_tokens
    assert 0.0 <= out.ratio <= 1.0
    again = default_compressor.compress(query, docs, ratio=ratio)
    assert again.compressed_text == out.compressed_text
