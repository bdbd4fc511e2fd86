"""The sentence probes' training material: labelled examples only (``ragattn probe train``; the
fit itself is :mod:`ragattn.lab.probe_fit`).

Sources (all in the shared data folder; evaluation questions never reach training):
- HotpotQA train sample (supporting-fact sentences),
- MuSiQue train sample (paragraph labels only; sentences are labelled by :data:`MUSIQUE_RULE`),
- SciFact train rationales (evidence sentences),
- SQuAD v2 answerable questions from the articles after the evaluation slice (answer sentence),
- 2WikiMultihopQA questions from index ``TWOWIKI_TRAIN_FROM`` on (the first 200 are evaluation).

Each example's passages are split with the same sentence splitter as at inference; a unit is
positive if at least half of its characters fall in a gold sentence. As in Sentinel, sentences are
shuffled inside passages (with probability ``shuffle``) so the probe cannot learn position alone.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ragattn.compress.features import Unit
from ragattn.lab.evaluation import datasets as ds
from ragattn.sentences import split_sentences
from ragattn.types import Document

TWOWIKI_TRAIN_FROM = 300
SQUAD_EVAL_QUESTIONS = 1000
"""SQuAD's evaluation slice: the first 1,000 answerable questions. Training takes questions only
from articles after every article that slice touches."""

SOURCES: tuple[str, ...] = (
    "hotpotqa-train",
    "2wiki-train",
    "musique-train",
    "scifact-train",
    "nq-train",
    "squad-train",
    "squad-unanswerable",
)
"""Every training source of :func:`load_training`, in its order; a quota names one of them."""

QUOTAS: Mapping[str, int] = MappingProxyType(
    {
        "hotpotqa-train": 100,
        "2wiki-train": 200,
        "scifact-train": 600,
        "nq-train": 650,
        "squad-train": 600,
        "squad-unanswerable": 250,
        "musique-train": 100,
    }
)
"""Training questions per source (at most; a source with fewer gives what it has)."""

SCIFACT_DISTRACTORS = 2
NQ_DISTRACTORS = 4
MUSIQUE_PASSAGES = 10
MUSIQUE_RULE = (
    "a sentence of a supporting paragraph is positive when it contains, case-insensitively and "
    "as whole words, the final answer, one of its aliases, or the answer of any decomposition "
    "step (a bridge entity); every sentence of a non-supporting paragraph is negative. A "
    "question keeps its supporting paragraphs and the first non-supporting ones in the file's "
    "order, "
    f"{MUSIQUE_PASSAGES} paragraphs in all (HotpotQA's shape)."
)
"""How MuSiQue's paragraph labels become sentence labels (issue 28 item 3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelledExample:
    """A question, its passages as Documents, and per-passage gold character ranges (an
    unanswerable question has no gold range at all: every sentence is a negative)."""

    source: str
    question: str
    documents: tuple[Document, ...]
    gold: tuple[tuple[tuple[int, int], ...], ...]


def _shuffled(
    example: ds.QAExample, rng: random.Random, shuffle: float, *, shuffle_passages: bool = False
) -> tuple[list[Document], list[tuple[tuple[int, int], ...]]]:
    passages = list(example.passages)
    if shuffle_passages:
        rng.shuffle(passages)
    docs: list[Document] = []
    gold: list[tuple[tuple[int, int], ...]] = []
    for passage in passages:
        sentences = list(passage.sentences)
        labels = [i in passage.supporting for i in range(len(sentences))]
        if len(sentences) > 1 and rng.random() < shuffle:
            order = list(range(len(sentences)))
            rng.shuffle(order)
            sentences = [sentences[i] for i in order]
            labels = [labels[i] for i in order]
        text: list[str] = []
        spans: list[tuple[int, int]] = []
        cursor = 0
        for sentence, label in zip(sentences, labels, strict=True):
            if text:
                text.append(" ")
                cursor += 1
            if label:
                spans.append((cursor, cursor + len(sentence)))
            text.append(sentence)
            cursor += len(sentence)
        docs.append(Document(text="".join(text), title=passage.title or None))
        gold.append(tuple(spans))
    return docs, gold


def _squad_training(data_dir: Path) -> tuple[list[ds.QAExample], list[ds.QAExample]]:
    """SQuAD v2 questions of the articles after the evaluation slice: answerable, unanswerable."""
    path = data_dir / "squad-v2" / "dev-v2.0.shared.json"
    held_out = {p.title for ex in ds.load_squad(path, SQUAD_EVAL_QUESTIONS) for p in ex.passages}
    answerable: list[ds.QAExample] = []
    unanswerable: list[ds.QAExample] = []
    for ex in ds.load_squad(path, answerable_only=False):
        if ex.passages[0].title in held_out:
            continue
        (answerable if ex.answers else unanswerable).append(ex)
    return answerable, unanswerable


def _scifact_training(data_dir: Path) -> list[ds.QAExample]:
    """SciFact train claims with their cited abstracts plus BM25 distractor abstracts from the
    full corpus (the evaluation shape: gold among look-alikes)."""
    folder = data_dir / "scifact"
    claims = ds.load_scifact_rationales(folder, split="train")
    beir = ds.load_beir(folder, "train")
    sentences = {str(d["_id"]): d for d in ds.read_jsonl(folder / "corpus_sentences.jsonl")}
    hits = ds.bm25_candidates(beir.corpus, {c.qid: c.question for c in claims}, k=20)
    by_qid = {h.qid: h for h in hits}
    out = []
    for claim in claims:
        cited = {p.title for p in claim.passages}
        extra = []
        for cand in by_qid[claim.qid].candidates:
            doc = sentences.get(cand.doc_id)
            if doc is None or doc["title"] in cited:
                continue
            extra.append(ds.joined_passage(doc["title"], doc["sentences"], (), is_gold=False)[0])
            if len(extra) == SCIFACT_DISTRACTORS:
                break
        out.append(replace(claim, passages=(*claim.passages, *extra)))
    return out


def _nq_training(data_dir: Path) -> list[ds.QAExample]:
    """NQ-open oracle: the gold passage (sentences holding a gold answer string are positive) plus
    BM25 distractors from the other questions' gold passages that hold no answer string."""
    rows = list(ds.read_jsonl(data_dir / "nq-open-oracle" / "nq-open-oracle.shared.jsonl"))
    corpus = {
        str(i): ds.CorpusDoc(doc_id=str(i), title=r["ctxs"][0]["title"], text=r["ctxs"][0]["text"])
        for i, r in enumerate(rows)
    }
    hits = ds.bm25_candidates(corpus, {str(i): r["question"] for i, r in enumerate(rows)}, k=20)
    out = []
    for i, (row, hit) in enumerate(zip(rows, hits, strict=True)):
        answers = [a.lower() for a in row["answers"] if a.strip()]
        gold_doc = corpus[str(i)]
        spans = tuple((s.start, s.end) for s in split_sentences(gold_doc.text))
        supporting = tuple(
            k
            for k, (a, b) in enumerate(spans)
            if any(ans in gold_doc.text[a:b].lower() for ans in answers)
        )
        if not supporting:
            continue
        passages = [
            ds.Passage(
                title=gold_doc.title,
                text=gold_doc.text,
                sentence_spans=spans,
                supporting=supporting,
                is_gold=True,
            )
        ]
        for cand in hit.candidates:
            if cand.doc_id == str(i) or any(ans in cand.text.lower() for ans in answers):
                continue
            passages.append(ds.split_passage(cand.title, cand.text, is_gold=False))
            if len(passages) > NQ_DISTRACTORS:
                break
        out.append(
            ds.QAExample(
                qid=f"nq-{row['line_index']}",
                question=row["question"],
                answers=tuple(row["answers"]),
                passages=tuple(passages),
            )
        )
    return out


def musique_sentence_labels(record: Mapping[str, Any]) -> ds.QAExample:
    """One MuSiQue record as an example with sentence labels by :data:`MUSIQUE_RULE`."""
    needles = {
        re.compile(rf"(?<!\w){re.escape(a.strip())}(?!\w)", re.IGNORECASE)
        for a in [
            record["answer"],
            *record.get("answer_aliases", []),
            *(step.get("answer", "") for step in record.get("question_decomposition", [])),
        ]
        if a and a.strip()
    }
    supporting = [p for p in record["paragraphs"] if p["is_supporting"]]
    others = [p for p in record["paragraphs"] if not p["is_supporting"]]
    chosen = {id(p) for p in [*supporting, *others][:MUSIQUE_PASSAGES]}
    passages = []
    for p in record["paragraphs"]:
        if id(p) not in chosen:
            continue
        text = p["paragraph_text"]
        spans = tuple((u.start, u.end) for u in split_sentences(text))
        positive = tuple(
            k
            for k, (a, b) in enumerate(spans)
            if p["is_supporting"] and any(n.search(text[a:b]) for n in needles)
        )
        passages.append(
            ds.Passage(
                title=p["title"],
                text=text,
                sentence_spans=spans,
                supporting=positive,
                is_gold=bool(p["is_supporting"]),
            )
        )
    return ds.QAExample(
        qid=str(record["id"]),
        question=record["question"],
        answers=tuple(dict.fromkeys([record["answer"], *record.get("answer_aliases", [])])),
        passages=tuple(passages),
    )


def _musique_training(data_dir: Path) -> list[ds.QAExample]:
    path = data_dir / "musique" / "musique_ans_v1.0_train.sample100.jsonl"
    return [musique_sentence_labels(r) for r in ds.read_jsonl(path)]


def load_training(
    data_dir: Path,
    *,
    per_source: int | None = None,
    quotas: Mapping[str, int] = QUOTAS,
    shuffle: float = 0.5,
    seed: int = 13,
) -> list[LabelledExample]:
    """Training examples from every source: ``quotas[source]`` at most from each (capped by
    ``per_source`` when given), deterministic for a seed, interleaved across sources.

    Sentences are shuffled inside a passage with probability ``shuffle``; passages whose order the
    dataset does not randomise (SciFact, NQ: gold first) are shuffled too."""
    if unknown := set(quotas) - set(SOURCES):
        raise ValueError(f"quotas name unknown sources: {sorted(unknown)}")
    squad_answerable, squad_unanswerable = _squad_training(data_dir)
    sources: list[tuple[str, Callable[[], Sequence[ds.QAExample]], bool]] = [
        (
            "hotpotqa-train",
            lambda: ds.load_hotpot(
                data_dir / "hotpotqa" / "hotpot_train_v1.1.sample100.shared.json"
            ),
            False,
        ),
        (
            "2wiki-train",
            lambda: ds.load_2wiki(data_dir / "2wikimultihopqa" / "2wiki_dev_sample500.json")[
                TWOWIKI_TRAIN_FROM:
            ],
            False,
        ),
        (
            "musique-train",
            lambda: _musique_training(data_dir),
            False,
        ),
        ("scifact-train", lambda: _scifact_training(data_dir), True),
        ("nq-train", lambda: _nq_training(data_dir), True),
        ("squad-train", lambda: squad_answerable, False),
        ("squad-unanswerable", lambda: squad_unanswerable, False),
    ]
    assert tuple(name for name, _, _ in sources) == SOURCES
    per: list[list[LabelledExample]] = []
    for name, load, shuffle_passages in sources:
        quota = quotas.get(name, 0)
        if per_source is not None:
            quota = min(quota, per_source)
        taken: list[LabelledExample] = []
        rng = random.Random(f"{seed}:{name}")  # per source: one quota never moves another's draws
        for ex in load() if quota > 0 else ():
            if len(taken) >= quota:
                break
            if name != "squad-unanswerable" and not any(p.supporting for p in ex.passages):
                continue
            docs, gold = _shuffled(ex, rng, shuffle, shuffle_passages=shuffle_passages)
            taken.append(
                LabelledExample(
                    source=name, question=ex.question, documents=tuple(docs), gold=tuple(gold)
                )
            )
        per.append(taken)
    # Interleaved in proportion to each source's size, so that any prefix of an extraction that
    # was stopped early is a balanced sample of every source.
    keyed = [
        ((i + 0.5) / len(items), s, ex) for s, items in enumerate(per) for i, ex in enumerate(items)
    ]
    return [ex for _, _, ex in sorted(keyed, key=lambda t: (t[0], t[1]))]


def units_and_labels(example: LabelledExample) -> tuple[list[Unit], np.ndarray]:
    """Inference-time units of the example and their 0/1 labels (≥ half the characters gold)."""
    units, labels = [], []
    for d, doc in enumerate(example.documents):
        for s in split_sentences(doc.text):
            inside = sum(max(0, min(s.end, b) - max(s.start, a)) for a, b in example.gold[d])
            units.append(Unit(d, s.start, s.end))
            labels.append(1 if inside * 2 >= (s.end - s.start) else 0)
    return units, np.asarray(labels)
