"""Training the sentence probes on labelled training material only (``ragattn probe train``).

Sources (all in the shared data folder; evaluation questions never reach training):
- HotpotQA train sample (supporting-fact sentences),
- (MuSiQue's train sample labels paragraphs, not sentences; it is read but contributes no example),
- SciFact train rationales (evidence sentences),
- SQuAD v2 answerable questions from the articles after the evaluation slice (answer sentence),
- 2WikiMultihopQA questions from index ``TWOWIKI_TRAIN_FROM`` on (the first 200 are evaluation).

Each example's passages are split with the same sentence splitter as at inference; a unit is
positive if at least half of its characters fall in a gold sentence. As in Sentinel, sentences are
shuffled inside passages (with probability ``shuffle``) so the probe cannot learn position alone.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ragattn.compress.features import Rows, Unit, sentence_features
from ragattn.compress.probe import Probe
from ragattn.lab.evaluation import datasets as ds
from ragattn.proxy import Proxy
from ragattn.sentences import split_sentences
from ragattn.types import Document

TWOWIKI_TRAIN_FROM = 300
SQUAD_TRAIN_FROM = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelledExample:
    """A question, its passages as Documents, and per-passage gold character ranges."""

    source: str
    question: str
    documents: tuple[Document, ...]
    gold: tuple[tuple[tuple[int, int], ...], ...]


def _shuffled(
    example: ds.QAExample, rng: random.Random, shuffle: float
) -> tuple[list[Document], list[tuple[tuple[int, int], ...]]]:
    docs: list[Document] = []
    gold: list[tuple[tuple[int, int], ...]] = []
    for passage in example.passages:
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


def load_training(
    data_dir: Path, *, per_source: int, shuffle: float = 0.5, seed: int = 13
) -> list[LabelledExample]:
    """Training examples from every source, ``per_source`` at most from each (deterministic)."""
    rng = random.Random(seed)
    sources: list[tuple[str, Iterable[ds.QAExample]]] = [
        (
            "hotpotqa-train",
            ds.load_hotpot(data_dir / "hotpotqa" / "hotpot_train_v1.1.sample100.shared.json"),
        ),
        (
            "musique-train",
            ds.load_musique(data_dir / "musique" / "musique_ans_v1.0_train.sample100.jsonl"),
        ),
        ("scifact-train", ds.load_scifact_rationales(data_dir / "scifact", split="train")),
        (
            "squad-train",
            ds.load_squad(data_dir / "squad-v2" / "dev-v2.0.shared.json")[SQUAD_TRAIN_FROM:],
        ),
        (
            "2wiki-train",
            ds.load_2wiki(data_dir / "2wikimultihopqa" / "2wiki_dev_sample500.json")[
                TWOWIKI_TRAIN_FROM:
            ],
        ),
    ]
    out = []
    for name, examples in sources:
        taken = 0
        for ex in examples:
            if taken >= per_source:
                break
            if not any(p.supporting for p in ex.passages):
                continue
            docs, gold = _shuffled(ex, rng, shuffle)
            out.append(
                LabelledExample(
                    source=name, question=ex.question, documents=tuple(docs), gold=tuple(gold)
                )
            )
            taken += 1
    return out


def units_and_labels(example: LabelledExample) -> tuple[list[Unit], np.ndarray]:
    """Inference-time units of the example and their 0/1 labels (≥ half the characters gold)."""
    units, labels = [], []
    for d, doc in enumerate(example.documents):
        for s in split_sentences(doc.text):
            inside = sum(max(0, min(s.end, b) - max(s.start, a)) for a, b in example.gold[d])
            units.append(Unit(d, s.start, s.end))
            labels.append(1 if inside * 2 >= (s.end - s.start) else 0)
    return units, np.asarray(labels)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureTable:
    """Training rows of every example: features, labels and the example (group) of each row."""

    names: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    sources: tuple[str, ...]


def extract(
    proxy: Proxy, examples: Sequence[LabelledExample], *, rows: Rows = "last"
) -> FeatureTable:
    """All feature blocks (attention, lexical, dense) for every example, with a progress bar."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    gs: list[np.ndarray] = []
    names: tuple[str, ...] = ()
    for g, ex in enumerate(tqdm(examples, desc="features", unit="q")):
        units, labels = units_and_labels(ex)
        feats = sentence_features(proxy, ex.question, ex.documents, units, rows=rows)
        names = feats.names
        xs.append(feats.matrix)
        ys.append(labels)
        gs.append(np.full(len(units), g))
    return FeatureTable(
        names=names,
        x=np.concatenate(xs),
        y=np.concatenate(ys),
        groups=np.concatenate(gs),
        sources=tuple(ex.source for ex in examples),
    )


def select_columns(
    table: FeatureTable, *, attention: bool, lexical: bool, dense: bool
) -> tuple[tuple[str, ...], np.ndarray]:
    """The columns a probe method uses (attention blocks, lexical, dense), in table order."""
    dense_names = {"dense", "dense_gap"}
    keep = []
    for i, name in enumerate(table.names):
        is_attn = ":" in name
        if (
            (is_attn and attention)
            or (not is_attn and name in dense_names and dense)
            or (not is_attn and name not in dense_names and lexical)
        ):
            keep.append(i)
    return tuple(table.names[i] for i in keep), table.x[:, keep]


def train(
    table: FeatureTable, *, attention: bool, lexical: bool, dense: bool, c: float, config: dict
) -> Probe:
    names, x = select_columns(table, attention=attention, lexical=lexical, dense=dense)
    return fit_probe(names, x, table.y, c=c, config=config)


def fit_probe(
    names: tuple[str, ...],
    x: np.ndarray,
    y: np.ndarray,
    *,
    c: float = 0.1,
    config: Mapping[str, Any] | None = None,
) -> Probe:
    """Fit a standardised, L2-regularised, class-balanced logistic regression (scikit-learn) and
    keep only its arrays, so the runtime applies it without scikit-learn."""
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    model = LogisticRegression(C=c, max_iter=2000, class_weight="balanced")
    model.fit((x - mean) / scale, y)
    return Probe(
        names=names,
        mean=mean,
        scale=scale,
        coef=model.coef_[0].astype(np.float64),
        intercept=float(model.intercept_[0]),
        config=dict(config or {}),
    )
