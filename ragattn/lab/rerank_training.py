"""Query-focused head selection (QRHead) and rank fusion, learned on training questions only.

``ragattn heads select`` reads multi-hop training questions (HotpotQA train sample, MuSiQue train
sample, 2WikiMultihopQA questions after the evaluation slice), whose paragraphs are labelled gold or
distractor. For each question one listwise forward (with the ``N/A`` twin on the shared prefix)
gives every head's calibrated attention mass per paragraph. Then:

- **QRHead**: each head ranks the paragraphs alone; heads are ordered by their mean nDCG over the
  training questions and the top ``k`` form the profile's head set.
- **Fusion**: a logistic regression over per-query z-scored features — the QRHead attention score,
  candidate-local BM25, MiniLM cosine and the first-stage rank prior — and the same without the
  attention feature, for the ablation. Both go to ``models/<proxy>/rerank-profile.json``
  (:mod:`ragattn.lab.qrhead`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ragattn.attention import HeadSet
from ragattn.first_stage import rank_prior
from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.evaluation.metrics import list_ndcg_at_10
from ragattn.proxy import Proxy
from ragattn.rerank.features import (
    bm25_local,
    dense_local,
    fusion_features,
    head_masses,
)
from ragattn.rerank.icr import WindowedAttention
from ragattn.types import Document

TWOWIKI_TRAIN_FROM = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankExample:
    source: str
    query: str
    documents: tuple[Document, ...]
    labels: tuple[int, ...]


def load_rerank_training(
    data_dir: Path, per_source: int, seed: int = 7, *, scifact: bool = False
) -> list[RerankExample]:
    """Training questions with gold/distractor paragraphs, shuffled (deterministically)."""
    rng = random.Random(seed)
    sources = [
        (
            "hotpotqa-train",
            ds.load_hotpot(data_dir / "hotpotqa" / "hotpot_train_v1.1.sample100.shared.json"),
        ),
        (
            "musique-train",
            ds.load_musique(data_dir / "musique" / "musique_ans_v1.0_train.sample100.jsonl"),
        ),
        (
            "2wiki-train",
            ds.load_2wiki(data_dir / "2wikimultihopqa" / "2wiki_dev_sample500.json")[
                TWOWIKI_TRAIN_FROM:
            ],
        ),
    ]
    # SciFact train claims are opt-in: the committed profile was fitted without them.
    out = _scifact_train(data_dir, per_source) if scifact else []
    for name, examples in sources:
        for ex in list(examples)[:per_source]:
            pairs = [
                (Document(text=p.text, title=p.title or None), int(p.is_gold)) for p in ex.passages
            ]
            if not any(label for _, label in pairs):
                continue
            rng.shuffle(pairs)
            out.append(
                RerankExample(
                    source=name,
                    query=ex.question,
                    documents=tuple(d for d, _ in pairs),
                    labels=tuple(label for _, label in pairs),
                )
            )
    return out


SCIFACT_TRAIN_DEPTH = 20
"""BM25 candidates per SciFact training claim: the depth the reranker is evaluated at on DL19."""


def _scifact_train(data_dir: Path, per_source: int) -> list[RerankExample]:
    """SciFact *train* claims (never test) with their BM25 top-20 from the full corpus, labelled by
    the train qrels; claims whose top-20 holds no relevant abstract are skipped. Unlike the QA
    sources these are first-stage candidate lists, the retrieval setting the reranker serves."""
    folder = data_dir / "scifact"
    if not (folder / "qrels" / "train.tsv").exists():
        return []
    data = ds.load_beir(folder, split="train")
    qids = sorted(q for q in data.queries if q in data.qrels)
    lists = ds.bm25_candidates(
        data.corpus, {q: data.queries[q] for q in qids}, k=SCIFACT_TRAIN_DEPTH
    )
    out = []
    for item in lists:
        relevant = {d for d, g in data.qrels[item.qid].items() if g > 0}
        labels = tuple(int(c.doc_id in relevant) for c in item.candidates)
        if not any(labels):
            continue
        out.append(
            RerankExample(
                source="scifact-train",
                query=item.query,
                documents=tuple(
                    Document(text=c.text, title=c.title or None, id=c.doc_id)
                    for c in item.candidates
                ),
                labels=labels,
            )
        )
        if len(out) == per_source:
            break
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankTable:
    masses: list[np.ndarray]
    bm25: list[np.ndarray]
    dense: list[np.ndarray]
    prior: list[np.ndarray]
    labels: list[np.ndarray]


def extract(proxy: Proxy | None, examples: Sequence[RerankExample]) -> RerankTable:
    """Per-list features of the training questions. With ``proxy`` None, no attention is run
    (``masses`` stays empty): enough to fit the fusions without attention."""
    windows = (
        None
        if proxy is None
        else WindowedAttention(
            proxy, HeadSet.from_layers(proxy.full_attention_layers(), proxy.num_heads)
        )
    )
    table = RerankTable(masses=[], bm25=[], dense=[], prior=[], labels=[])
    for ex in tqdm(examples, desc="rerank features", unit="q"):
        bm25 = bm25_local(ex.query, ex.documents)
        order = sorted(range(len(ex.documents)), key=lambda i: (-bm25[i], i))
        if windows is not None:
            table.masses.append(head_masses(windows, ex.query, ex.documents, order)[0])
        table.bm25.append(bm25)
        table.dense.append(dense_local(ex.query, ex.documents))
        table.prior.append(rank_prior(order))
        table.labels.append(np.asarray(ex.labels))
    return table


def select_heads(
    table: RerankTable, heads: HeadSet, k: int
) -> tuple[list[tuple[int, int]], list[float]]:
    """Top-``k`` heads by mean nDCG of ranking each question's paragraphs with that head alone."""
    n = len(table.masses)
    # A left-to-right sum, as the committed profile was computed (np.mean sums pairwise).
    per_head = np.asarray(
        [
            sum(list_ndcg_at_10([m[:, h] for m in table.masses], table.labels).tolist()) / n
            for h in range(len(heads))
        ]
    )
    top = np.argsort(-per_head, kind="stable")[:k]
    return [heads.pairs[i] for i in top], [float(per_head[i]) for i in top]


def fit_fusion(
    table: RerankTable, head_index: Sequence[int], *, attention: bool, prior: bool = True
) -> tuple[np.ndarray, float]:
    """L2 logistic regression (C=1, balanced classes) on the z-scored list features: with or
    without the attention feature, and with or without the rank prior (``prior=False`` is the
    order-free fusion the reranker uses when the caller passes no first-stage order)."""
    from sklearn.linear_model import LogisticRegression

    xs, ys = [], []
    for i, (bm25, dense, rank, labels) in enumerate(
        zip(table.bm25, table.dense, table.prior, table.labels, strict=True)
    ):
        att = table.masses[i][:, list(head_index)].sum(axis=1) if attention else None
        xs.append(fusion_features(att, bm25, dense, rank if prior else None))
        ys.append(labels)
    model = LogisticRegression(C=1.0, max_iter=1000, class_weight="balanced").fit(
        np.concatenate(xs), np.concatenate(ys)
    )
    return model.coef_[0], float(model.intercept_[0])
