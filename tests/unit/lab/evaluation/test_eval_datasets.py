"""Loaders on the real shared data: counts, exact spans, labels and the training split."""

from __future__ import annotations

import json
import re

import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets import (
    CorpusDoc,
    bm25_candidates,
    load_2wiki,
    load_beir,
    load_dl19,
    load_hotpot,
    load_musique,
    load_scifact_rationales,
    load_squad,
    split_for_training,
)


def _assert_spans_exact(example):  # noqa: ANN001, ANN202
    for p in example.passages:
        previous_end = 0
        for start, end in p.sentence_spans:
            assert previous_end <= start < end <= len(p.text)
            assert p.text[start:end] == p.text[start:end].strip()
            previous_end = end
        assert all(0 <= i < len(p.sentence_spans) for i in p.supporting)


def test_dl19_top20_keeps_bm25_order_and_all_qrels(data_dir):
    dl19 = load_dl19(data_dir / "trec-dl-2019", top_k=20)
    assert len(dl19.queries) == 43
    assert sum(len(j) for j in dl19.qrels.values()) == 9260
    for q in dl19.queries:
        assert [c.first_stage_rank for c in q.candidates] == list(range(1, 21))
        scores = [c.first_stage_score for c in q.candidates]
        assert scores == sorted(scores, reverse=True)


def test_dl19_rejects_depth_beyond_the_file(data_dir):
    with pytest.raises(InvalidInputError, match=re.escape("top_k must be in 1..100")):
        load_dl19(data_dir / "trec-dl-2019", top_k=101)


@pytest.mark.parametrize(
    ("loader", "relpath"),
    [
        (load_2wiki, "2wikimultihopqa/2wiki_dev_sample500.json"),
        (load_hotpot, "hotpotqa/hotpot_dev_distractor_v1.shared.json"),
        (load_hotpot, "hotpotqa/hotpot_train_v1.1.sample100.shared.json"),
    ],
)
def test_hotpot_layout_gold_spans_slice_back_to_the_sentences(data_dir, loader, relpath):
    raw = json.loads((data_dir / relpath).read_text(encoding="utf-8"))[:25]
    examples = loader(data_dir / relpath, limit=25)
    assert [e.qid for e in examples] == [r["_id"] for r in raw]
    for ex, rec in zip(examples, raw, strict=True):
        _assert_spans_exact(ex)
        by_title = {p.title: p for p in ex.passages}
        for p, (_, sentences) in zip(ex.passages, rec["context"], strict=True):
            kept = tuple(s.strip() for s in sentences if s.strip())  # blank sentences are dropped
            assert p.text == " ".join(kept)
            assert p.sentences == kept
        assert ex.num_supporting == len({(t, i) for t, i in rec["supporting_facts"]})
        for title, idx in rec["supporting_facts"]:
            passage = by_title[title]
            raw_sentences = dict(rec["context"])[title]
            new_idx = sum(1 for s in raw_sentences[:idx] if s.strip())
            assert new_idx in passage.supporting and passage.is_gold
            assert passage.sentence(new_idx) == raw_sentences[idx].strip()
        assert ex.answers == (rec["answer"],)


def test_squad_gold_sentence_holds_the_answer(data_dir):
    examples = load_squad(data_dir / "squad-v2/dev-v2.0.shared.json", limit=60)
    assert len(examples) == 60
    for ex in examples:
        _assert_spans_exact(ex)
        (passage,) = ex.passages
        assert ex.answers and passage.supporting
        gold_text = " ".join(passage.sentence(i) for i in passage.supporting)
        assert any(a in gold_text for a in ex.answers)


def test_squad_unanswerable_examples_have_no_gold(data_dir):
    examples = load_squad(
        data_dir / "squad-v2/dev-v2.0.shared.json", limit=80, answerable_only=False
    )
    unanswerable = [e for e in examples if not e.answers]
    assert unanswerable
    assert all(e.num_supporting == 0 and not e.passages[0].is_gold for e in unanswerable)


def test_musique_labels_paragraphs_only(data_dir):
    path = data_dir / "musique/musique_ans_v1.0_train.sample100.jsonl"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:5]]
    examples = load_musique(path, limit=5)
    for ex, rec in zip(examples, raw, strict=True):
        _assert_spans_exact(ex)
        assert len(ex.passages) == 20 and ex.num_supporting == 0
        assert [p.is_gold for p in ex.passages] == [p["is_supporting"] for p in rec["paragraphs"]]
        assert ex.answers[0] == rec["answer"]


def test_scifact_rationales_match_the_evidence_sentences(data_dir):
    examples = load_scifact_rationales(data_dir / "scifact", "test")
    assert len(examples) == 91
    rows = [
        json.loads(line)
        for line in (data_dir / "scifact/evidence.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    by_qid = {e.qid: e for e in examples}
    checked = 0
    for row in rows:
        ex = by_qid.get(str(row["query_id"]))
        if ex is None:
            continue
        _assert_spans_exact(ex)
        assert ex.question == row["claim"]
        passage = next(p for p in ex.passages if p.supporting and p.is_gold and p.title)
        texts = {p.sentence(i) for p in ex.passages for i in p.supporting}
        assert {s.strip() for s in row["evidence_sentences"]} <= texts
        assert passage.text
        checked += 1
    assert checked >= 91


def test_beir_scifact_test_split(data_dir):
    beir = load_beir(data_dir / "scifact", "test")
    assert len(beir.corpus) == 5183
    assert len(beir.queries) == len(beir.qrels) == 150


def test_bm25_candidates_ranks_the_matching_document_first():
    corpus = {
        "a": CorpusDoc(doc_id="a", title="Cats", text="Cats purr and sleep all day."),
        "b": CorpusDoc(doc_id="b", title="Dogs", text="Dogs bark at the mail carrier."),
        "c": CorpusDoc(doc_id="c", title="Fish", text="Fish swim; some fish bark? No."),
    }
    (query,) = bm25_candidates(corpus, {"q1": "why do dogs bark"}, k=2)
    assert [c.doc_id for c in query.candidates] == ["b", "c"]
    assert [c.first_stage_rank for c in query.candidates] == [1, 2]


def test_split_for_training_is_disjoint_and_independent_of_limit(data_dir):
    path = data_dir / "2wikimultihopqa/2wiki_dev_sample500.json"
    full = split_for_training(load_2wiki(path), 0.4, seed=0)
    part = split_for_training(load_2wiki(path, limit=100), 0.4, seed=0)
    train_ids = {e.qid for e in full.train}
    eval_ids = {e.qid for e in full.evaluation}
    assert not train_ids & eval_ids and len(train_ids | eval_ids) == 500
    assert 150 <= len(train_ids) <= 250
    assert {e.qid for e in part.train} <= train_ids
    assert {e.qid for e in part.evaluation} <= eval_ids
    assert split_for_training(load_2wiki(path), 0.4, seed=0) == full


def test_split_for_training_rejects_bad_fraction():
    with pytest.raises(InvalidInputError, match=re.escape("holdout_fraction must be in [0, 1]")):
        split_for_training((), 1.5)
