"""Budget selector invariants and the baseline scorers on small hand-built examples."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.baselines import (
    BM25SentenceScorer,
    MiniLMRanker,
    MiniLMSentenceScorer,
    PositionScorer,
    RandomScorer,
    SentenceScorer,
    first_stage_order,
    select_by_budget,
)
from ragattn.lab.evaluation.datasets import Candidate, Passage, RerankQuery


def _passage(*sentences: str, title: str = "") -> Passage:
    spans, cursor = [], 0
    for s in sentences:
        spans.append((cursor, cursor + len(s)))
        cursor += len(s) + 1
    return Passage(title=title, text=" ".join(sentences), sentence_spans=tuple(spans))


PASSAGES = (
    _passage("The Eiffel Tower is in Paris.", "It opened in 1889."),
    _passage("Bananas are yellow.", "The tower is made of wrought iron.", "Paris is in France."),
)
QUESTION = "When did the Eiffel Tower open?"


def test_select_by_budget_skips_what_does_not_fit_and_continues():
    spans = [((0, 1), (2, 3), (4, 5))]
    counts = [np.array([5, 6, 3])]
    scores = [np.array([0.9, 0.8, 0.1])]
    # budget 0.5 * 14 = 7: keep 5, skip 6, keep 3 -> 8 > 7 is skipped too
    assert select_by_budget(scores, spans, counts, 0.5) == (((0, 1),),)
    # budget 0.6 * 14 = 8.4: keep 5, skip 6, keep 3
    assert select_by_budget(scores, spans, counts, 0.6) == (((0, 1), (4, 5)),)


def test_select_by_budget_keeps_the_best_sentence_even_over_budget():
    kept = select_by_budget([np.array([0.1, 0.7])], [((0, 4), (5, 9))], [np.array([3, 50])], 0.01)
    assert kept == (((5, 9),),)


def test_select_by_budget_breaks_ties_by_position():
    kept = select_by_budget(
        [np.zeros(2), np.zeros(2)], [((0, 1), (2, 3)), ((0, 1), (2, 3))], [np.ones(2)] * 2, 0.5
    )
    assert kept == (((0, 1), (2, 3)), ())


@pytest.mark.parametrize("ratio", [0.05, 0.2, 0.33, 0.7, 1.0])
def test_select_by_budget_respects_the_budget_on_random_examples(ratio):
    rng = np.random.default_rng(7)
    for _ in range(50):
        sizes = rng.integers(1, 6, size=rng.integers(1, 5))
        spans = [tuple((2 * i, 2 * i + 1) for i in range(n)) for n in sizes]
        counts = [rng.integers(1, 40, size=n) for n in sizes]
        scores = [rng.random(n) for n in sizes]
        kept = select_by_budget(scores, spans, counts, ratio)
        cost = {
            (p, s): int(counts[p][i]) for p in range(len(spans)) for i, s in enumerate(spans[p])
        }
        used = sum(cost[(p, s)] for p, ks in enumerate(kept) for s in ks)
        n_kept = sum(len(k) for k in kept)
        assert n_kept >= 1
        assert n_kept == 1 or used <= ratio * sum(int(c.sum()) for c in counts)
        assert all(
            list(k) == sorted(k) and set(k) <= set(s) for k, s in zip(kept, spans, strict=True)
        )
        if ratio == 1.0:
            assert n_kept == sum(sizes)


def test_select_by_budget_validates_its_inputs():
    with pytest.raises(InvalidInputError, match=re.escape("ratio must be in (0, 1], got 0")):
        select_by_budget([np.ones(1)], [((0, 1),)], [np.ones(1)], 0)
    with pytest.raises(InvalidInputError, match=re.escape("passage 0: 2 scores, 1 spans")):
        select_by_budget([np.ones(2)], [((0, 1),)], [np.ones(1)], 0.5)
    with pytest.raises(InvalidInputError, match="no sentences"):
        select_by_budget([np.ones(0)], [()], [np.ones(0)], 0.5)


def test_position_scorer_orders_earliest_first_across_passages():
    scores = PositionScorer().score(QUESTION, PASSAGES)
    flat = np.concatenate(scores)
    assert list(np.argsort(-flat, kind="stable")) == [0, 1, 2, 3, 4]


def test_random_scorer_is_reproducible_per_question():
    a = RandomScorer(seed=3).score(QUESTION, PASSAGES)
    b = RandomScorer(seed=3).score(QUESTION, PASSAGES)
    c = RandomScorer(seed=4).score(QUESTION, PASSAGES)
    assert [len(x) for x in a] == [2, 3]
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_bm25_scorer_prefers_sentences_sharing_question_terms():
    scores = BM25SentenceScorer().score(QUESTION, PASSAGES)
    assert [len(s) for s in scores] == [2, 3]
    flat = np.concatenate(scores)
    assert int(np.argmax(flat)) == 0  # "Eiffel Tower" matches two rare terms
    assert flat[2] == 0.0  # bananas share nothing


def test_scorers_satisfy_the_protocol():
    for scorer in (RandomScorer(), PositionScorer(), BM25SentenceScorer()):
        assert isinstance(scorer, SentenceScorer)


def test_first_stage_order_keeps_ranks():
    query = RerankQuery(
        qid="q",
        query="x",
        candidates=tuple(
            Candidate(doc_id=d, text=d, title="", first_stage_score=s, first_stage_rank=r)
            for r, (d, s) in enumerate([("b", 9.0), ("a", 9.0), ("c", 1.0)], start=1)
        ),
    )
    scores = first_stage_order(query)
    assert sorted(scores, key=scores.get, reverse=True) == ["b", "a", "c"]


@pytest.mark.slow  # loads the packaged MiniLM
def test_minilm_baselines_find_the_obvious_match():
    sentence_scores = MiniLMSentenceScorer().score(QUESTION, PASSAGES)
    assert int(np.argmax(np.concatenate(sentence_scores))) in (0, 1)
    query = RerankQuery(
        qid="q",
        query="how tall is the eiffel tower",
        candidates=(
            Candidate(
                doc_id="x",
                text="Bananas are rich in potassium.",
                title="",
                first_stage_score=2.0,
                first_stage_rank=1,
            ),
            Candidate(
                doc_id="y",
                text="The Eiffel Tower is 330 metres tall.",
                title="Eiffel Tower",
                first_stage_score=1.0,
                first_stage_rank=2,
            ),
        ),
    )
    scores = MiniLMRanker()(query)
    assert scores["y"] > scores["x"]
