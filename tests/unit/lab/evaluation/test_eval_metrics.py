"""Metrics on hand-built inputs with known values, and the DL19 BM25 anchor."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets import load_dl19
from ragattn.lab.evaluation.metrics import (
    achieved_ratio,
    answer_retention,
    contains_answer,
    count_tokens,
    kept_text,
    ndcg_at_10,
    normalize_answer,
    r_precision,
    recall_at_k,
    sentence_kept,
    supporting_fact_recall,
)

QRELS = {"q": {"d1": 3, "d2": 0, "d3": 1, "d4": 2}}  # d4 is judged but never retrieved


def test_perfect_ranking_scores_one():
    run = {"q": {"d1": 3.0, "d4": 2.0, "d3": 1.0, "d2": 0.0}}
    mean, per_query = ndcg_at_10(run, QRELS)
    assert mean == pytest.approx(1.0)
    assert per_query == {"q": pytest.approx(1.0)}


def test_ndcg_uses_linear_gain_and_ideal_from_all_judged_documents():
    run = {"q": {"d2": 0.9, "d3": 0.8, "d1": 0.7}}
    dcg = 0 / math.log2(2) + 1 / math.log2(3) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    mean, _ = ndcg_at_10(run, QRELS)
    assert mean == pytest.approx(dcg / ideal, abs=1e-4)  # 0.4475


def test_ndcg_breaks_ties_by_descending_doc_id_like_trec_eval():
    tied = {"q": {"d1": 1.0, "d3": 1.0}}  # trec_eval order: d3, d1
    expected = {"q": {"d3": 2.0, "d1": 1.0}}
    assert ndcg_at_10(tied, QRELS)[0] == pytest.approx(ndcg_at_10(expected, QRELS)[0])


def test_ndcg_averages_over_queries_in_both_run_and_qrels():
    qrels = {"a": {"x": 1}, "b": {"y": 1}}
    run = {"a": {"x": 1.0}, "b": {"z": 1.0, "y": 0.0}, "c": {"x": 1.0}}
    mean, per_query = ndcg_at_10(run, qrels)
    assert set(per_query) == {"a", "b"}
    assert mean == pytest.approx((1.0 + 1 / math.log2(3)) / 2)


def test_ndcg_rejects_a_run_without_common_queries():
    with pytest.raises(InvalidInputError, match=re.escape("shares no query id")):
        ndcg_at_10({"other": {"d1": 1.0}}, QRELS)


def test_recall_at_k_counts_unretrieved_relevant_documents():
    run = {"q": {"d2": 0.9, "d3": 0.8, "d1": 0.7}}
    assert recall_at_k(run, QRELS, 2)[0] == pytest.approx(1 / 3)  # d3 of {d1, d3, d4}
    assert recall_at_k(run, QRELS, 3, min_relevance=2)[0] == pytest.approx(1 / 2)


def test_bm25_order_on_dl19_reproduces_the_published_ndcg(data_dir):
    dl19 = load_dl19(data_dir / "trec-dl-2019", top_k=100)
    run = {
        q.qid: {c.doc_id: -float(c.first_stage_rank) for c in q.candidates} for q in dl19.queries
    }
    mean, per_query = ndcg_at_10(run, dl19.qrels)
    assert len(per_query) == 43
    assert mean == pytest.approx(0.5058, abs=0.001)


def test_sentence_kept_needs_half_of_its_characters():
    sentence = (10, 20)
    assert sentence_kept(sentence, [(15, 25)])  # exactly 5 of 10
    assert not sentence_kept(sentence, [(16, 30)])
    assert sentence_kept(sentence, [(0, 12), (11, 14), (18, 40)])  # 10-14 and 18-20: 6 chars
    assert not sentence_kept(sentence, [(12, 14), (12, 14), (13, 15)])  # overlaps counted once


def test_supporting_fact_recall_pools_passages():
    gold = [[(0, 10), (20, 30)], [(0, 8)], []]
    kept = [[(0, 10)], [(0, 4)], [(0, 50)]]
    assert supporting_fact_recall(kept, gold) == pytest.approx(2 / 3)
    assert supporting_fact_recall([[]], [[]]) is None
    with pytest.raises(InvalidInputError, match="passages"):
        supporting_fact_recall([[]], [[], []])


def test_r_precision_ranks_all_passages_together_with_earliest_first_ties():
    scores = [np.array([0.1, 0.9]), np.array([0.5, 0.9, 0.2])]
    assert r_precision(scores, [[1], [0]]) == pytest.approx(0.5)  # top-2: p0s1, p1s1
    assert r_precision(scores, [[1], [1]]) == pytest.approx(1.0)
    constant = [np.zeros(2), np.zeros(3)]
    assert r_precision(constant, [[0, 1], []]) == pytest.approx(1.0)
    assert r_precision(constant, [[], []]) is None


def test_normalize_answer_follows_squad():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"


def test_contains_answer_matches_whole_words_only():
    assert contains_answer("It was built in Paris, France.", ["paris"])
    assert not contains_answer("Concatenate strings.", ["cat"])
    assert contains_answer("The Beatles played.", ["Beatles"])
    assert contains_answer("Before Rollo's arrival", ["Rollo"])
    assert contains_answer("bases of the Adriatic—fell again", ["the Adriatic"])
    assert contains_answer("the U.S. Army", ["U.S."])


def test_answer_retention_only_counts_answers_present_in_the_context():
    full = "Alice was born in Paris. She moved to Rome."
    assert answer_retention("She moved to Rome.", full, ["Paris"]) is False
    assert answer_retention("Alice was born in Paris.", full, ["Paris"]) is True
    assert answer_retention("x", full, ["London"]) is None
    assert answer_retention("no", "yes no maybe", ["no"]) is None  # abstractive yes/no


def test_kept_text_joins_spans_in_document_order():
    assert kept_text("abc def ghi", [(8, 11), (0, 3)]) == "abc ghi"


def test_achieved_ratio_counts_tokens_per_passage(ws_tokenizer):
    assert achieved_ratio(["a b", ""], ["a b c d", "e f g h"], ws_tokenizer) == pytest.approx(0.25)
    assert list(count_tokens(ws_tokenizer, ["a b", "c"])) == [2, 1]


@pytest.mark.slow  # loading transformers + the tokenizer takes seconds
def test_count_tokens_with_the_proxy_tokenizer(proxy_tokenizer):
    counts = count_tokens(proxy_tokenizer, ["Hello world.", ""])
    assert counts[0] > 0 and counts[1] == 0
