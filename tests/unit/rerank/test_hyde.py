"""HyDE reranking (``minilm-hyde``): real greedy generations of the packaged proxy, real MiniLM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ragattn.rerank import METHODS, Reranker
from ragattn.rerank.features import dense_local
from ragattn.rerank.hyde import HYDE_WEIGHT, HydeScorer, HypotheticalAnswers
from ragattn.types import Document

QUERY = "What is the capital of Australia?"
DOCS = [
    "Sydney is the largest city in Australia.",
    "Wellington is the capital of New Zealand.",
    "Melbourne is the capital of the Australian state of Victoria.",
    "Canberra is the capital city of Australia.",
]


@pytest.fixture(scope="module")
def answers(proxy) -> HypotheticalAnswers:
    return HypotheticalAnswers(proxy)


def test_the_proxy_answers_in_one_short_sentence(answers, proxy) -> None:
    answer = answers(QUERY)
    assert "Canberra" in answer
    assert len(proxy.tokenizer(answer)["input_ids"]) <= answers.max_new_tokens
    # Greedy: the same query gets the same answer, and the cache hands it back.
    assert HypotheticalAnswers(proxy)(QUERY) == answer
    assert QUERY in answers._cache and answers(QUERY) == answer


def test_the_answer_breaks_a_bi_encoder_near_tie(answers) -> None:
    docs = [Document(text=t) for t in DOCS]
    by_query = dense_local(QUERY, docs)
    # MiniLM alone puts Melbourne (a state capital) at or above Canberra.
    assert by_query[2] >= by_query[3] - 0.01
    scores = HydeScorer(answers.proxy, answers=answers).score(QUERY, docs, None)
    assert int(np.argmax(scores.raw)) == 3
    assert np.all((scores.raw >= -1.0) & (scores.raw <= 1.0))
    np.testing.assert_allclose(scores.relevance, (scores.raw + 1.0) / 2.0)
    assert scores.warnings == ()


def test_scores_do_not_depend_on_input_order(answers) -> None:
    scorer = HydeScorer(answers.proxy, answers=answers)
    base = dict(
        zip(DOCS, scorer.score(QUERY, [Document(text=t) for t in DOCS], None).raw, strict=True)
    )
    for perm in itertools.permutations(DOCS):
        got = scorer.score(QUERY, [Document(text=t) for t in perm], None).raw
        assert dict(zip(perm, got, strict=True)) == base


def test_weight_zero_is_minilm_and_needs_no_generation(proxy) -> None:
    class Refuse(HypotheticalAnswers):
        def _generate(self, query: str) -> str:
            raise AssertionError("weight 0 must not generate")

    docs = [Document(text=t) for t in DOCS]
    got = HydeScorer(proxy, weight=0.0, answers=Refuse(proxy)).score(QUERY, docs, None)
    np.testing.assert_array_equal(got.raw, dense_local(QUERY, docs))


def test_an_empty_answer_falls_back_to_the_query_and_says_so(proxy) -> None:
    class Silent(HypotheticalAnswers):
        def _generate(self, query: str) -> str:
            return ""

    docs = [Document(text=t) for t in DOCS]
    got = HydeScorer(proxy, answers=Silent(proxy)).score(QUERY, docs, None)
    np.testing.assert_array_equal(got.raw, dense_local(QUERY, docs))
    assert got.warnings and "no answer" in got.warnings[0]


def test_a_negative_weight_is_refused(proxy) -> None:
    with pytest.raises(ValueError, match="weight"):
        HydeScorer(proxy, weight=-0.1)


def test_the_method_is_registered_order_free_and_ranks(proxy) -> None:
    spec = METHODS["minilm-hyde"]
    assert spec.order_free and spec.generates and spec.needs_embedder
    assert not spec.reads_attention
    assert HYDE_WEIGHT > 0 and f"+ {HYDE_WEIGHT} x cosine" in spec.score_scale
    ranked = Reranker(proxy, method="minilm-hyde").rerank(QUERY, DOCS)
    assert ranked[0].index == 3 and ranked.method == "minilm-hyde"


def test_a_query_longer_than_the_context_gets_no_answer_and_a_warning(proxy) -> None:
    limit = int(proxy.config.max_position_embeddings)
    query = "capital " * limit
    docs = [Document(text=t) for t in DOCS]
    got = HydeScorer(proxy).score(query, docs, None)
    np.testing.assert_array_equal(got.raw, dense_local(query, docs))
    assert got.warnings and "exceeds its context" in got.warnings[0]
