"""The harness end to end on hand-built data: known scores, validation and report shapes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.baselines import PositionScorer
from ragattn.lab.evaluation.datasets import Candidate, Passage, QAExample, RerankQuery
from ragattn.lab.evaluation.harness import evaluate_rerank, evaluate_selection


def _query(qid: str, ids: list[str]) -> RerankQuery:
    return RerankQuery(
        qid=qid,
        query=f"query {qid}",
        candidates=tuple(
            Candidate(doc_id=d, text=d, title="", first_stage_score=0.0, first_stage_rank=r)
            for r, d in enumerate(ids, start=1)
        ),
    )


QUERIES = (_query("1", ["a", "b", "c"]), _query("2", ["d", "e"]))
QRELS = {"1": {"c": 2, "a": 0}, "2": {"d": 1}}


def _oracle(query: RerankQuery) -> dict[str, float]:
    return {c.doc_id: float(QRELS[query.qid].get(c.doc_id, 0)) for c in query.candidates}


def test_evaluate_rerank_scores_each_system():
    report = evaluate_rerank(
        QUERIES,
        QRELS,
        {
            "oracle": _oracle,
            "first": lambda q: {c.doc_id: -c.first_stage_rank for c in q.candidates},
        },
    )
    oracle, first = report.rows
    assert oracle.ndcg_at_10 == pytest.approx(1.0)
    assert first.per_query["2"] == pytest.approx(1.0)
    assert first.per_query["1"] == pytest.approx(1 / np.log2(4))  # c at rank 3
    assert report.num_queries == 2 and report.depth == 3
    table = report.to_markdown().splitlines()
    assert len(table) == 4 and table[2].startswith("| oracle | 1.0000 |")
    json.dumps(report.to_dict())


def test_evaluate_rerank_rejects_a_ranker_that_drops_candidates():
    with pytest.raises(
        InvalidInputError, match=re.escape("ranker 'lossy' returned 1 ids for query 1")
    ):
        evaluate_rerank(QUERIES, QRELS, {"lossy": lambda q: {q.candidates[0].doc_id: 1.0}})


class _GoldScorer:
    """Scores gold sentences 1 and the rest 0 (reads the labels: an upper bound)."""

    def score(self, question, passages):  # noqa: ANN001, ANN201
        return [
            np.isin(np.arange(len(p.sentence_spans)), p.supporting).astype(float) for p in passages
        ]


def _example() -> QAExample:
    text0 = "alpha beta gamma delta. Paris is the capital. epsilon zeta eta theta."
    text1 = "one two three four five six. seven eight nine ten eleven twelve."
    spans0 = ((0, 23), (24, 45), (46, 69))
    spans1 = ((0, 28), (29, 64))
    return QAExample(
        qid="x",
        question="What is the capital?",
        answers=("Paris",),
        passages=(
            Passage(title="A", text=text0, sentence_spans=spans0, supporting=(1,), is_gold=True),
            Passage(title="B", text=text1, sentence_spans=spans1),
        ),
    )


def test_evaluate_selection_with_labels_and_position(ws_tokenizer):
    ex = _example()
    for p in ex.passages:
        assert all(p.text[a:b] == p.text[a:b].strip() for a, b in p.sentence_spans)
    report = evaluate_selection(
        [ex],
        {"gold": _GoldScorer(), "position": PositionScorer()},
        (0.2, 1.0),
        tokenizer=ws_tokenizer,
    )
    gold, position = report.rows
    assert gold.recall == (1.0, 1.0) and gold.r_precision == 1.0
    assert gold.answer_retention == (1.0, 1.0)
    assert gold.achieved_ratio[0] == pytest.approx(4 / 24) and gold.achieved_ratio[1] == 1.0
    assert position.recall == (0.0, 1.0) and position.r_precision == 0.0
    assert report.num_with_gold == 1 and report.num_with_answer == 1
    assert report.tokenizer == "whitespace"
    lines = report.to_markdown().splitlines()
    assert len(lines) == 4 and "recall @20%" in lines[0]
    json.dumps(report.to_dict())


def test_evaluate_selection_rejects_wrong_score_shapes(ws_tokenizer):
    class Short:
        def score(self, question, passages):  # noqa: ANN001, ANN201
            return [np.zeros(1) for _ in passages]

    with pytest.raises(
        InvalidInputError, match=re.escape("scorer 'short' did not return one score")
    ):
        evaluate_selection([_example()], {"short": Short()}, tokenizer=ws_tokenizer)
