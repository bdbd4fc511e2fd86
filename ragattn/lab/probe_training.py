"""Training the sentence probes on labelled training material only (``ragattn probe train``).

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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from ragattn.compress.features import Rows, Unit
from ragattn.compress.probe import Normalise, Probe, Trees, per_question, pool_layers
from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.feature_store import FeatureStore
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


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureTable:
    """Training rows of every example: features, labels and the example (group) of each row."""

    names: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    sources: tuple[str, ...]


def extract(
    store: FeatureStore,
    examples: Sequence[LabelledExample],
    *,
    progress: bool = True,
    cached_only: bool = False,
) -> tuple[FeatureTable, ExtractionStats]:
    """Features of every example through ``store`` (computed once, then read from disk), with a
    progress bar; the table's rows are in example order. ``cached_only`` skips the examples not
    yet on disk (to study a partial extraction while it runs)."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    gs: list[np.ndarray] = []
    names: tuple[str, ...] = ()
    computed, seconds = 0, 0.0
    bar = tqdm(examples, desc="features", unit="q", disable=not progress)
    kept: list[LabelledExample] = []
    for ex in bar:
        units, labels = units_and_labels(ex)
        if cached_only and not store.path(ex.source, ex.question, ex.documents, units).is_file():
            continue
        g = len(kept)
        kept.append(ex)
        started = time.perf_counter()
        feats, fresh = store.get(ex.source, ex.question, ex.documents, units)
        if fresh:
            computed += 1
            seconds += time.perf_counter() - started
            bar.set_postfix(s_per_q=f"{seconds / computed:.2f}")
        if names and feats.names != names:
            raise ValueError("feature names differ between examples of one store")
        names = feats.names
        xs.append(feats.matrix)
        ys.append(labels)
        gs.append(np.full(len(units), g))
    table = FeatureTable(
        names=names,
        x=np.concatenate(xs),
        y=np.concatenate(ys),
        groups=np.concatenate(gs),
        sources=tuple(ex.source for ex in kept),
    )
    return table, ExtractionStats(examples=len(kept), computed=computed, seconds=seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractionStats:
    """How many examples were extracted now (the rest came from disk) and their wall seconds."""

    examples: int
    computed: int
    seconds: float

    @property
    def seconds_per_question(self) -> float | None:
        return self.seconds / self.computed if self.computed else None


Learner = Literal["logreg", "trees"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeConfig:
    """One point of the probe search: which columns, how they are normalised and the learner.

    ``rows`` and ``layers`` restrict the attention block (the widest store holds both row kinds of
    every layer); ``learner`` is ``"logreg"`` (L2, strength ``1/c``) or ``"trees"`` (gradient
    boosting).
    """

    attention: bool
    lexical: bool
    dense: bool
    rows: Rows = "last"
    layers: int | None = None
    normalise: Normalise = "none"
    pool: Literal["none", "layer"] = "none"
    learner: Learner = "logreg"
    c: float = 0.1

    def as_dict(self, dtype: str) -> dict[str, Any]:
        """The probe file's ``config`` (what the runtime reads back)."""
        return {
            "attention": self.attention,
            "lexical": self.lexical,
            "dense": self.dense,
            "rows": self.rows,
            "layers": self.layers,
            "dtype": dtype if self.attention else None,
            "normalise": self.normalise,
            "pool": self.pool,
            "learner": self.learner,
            "C": self.c,
        }


DENSE_COLUMNS = frozenset({"dense", "dense_gap"})


def select_columns(table: FeatureTable, config: ProbeConfig) -> tuple[tuple[str, ...], np.ndarray]:
    """The columns a probe configuration reads, in table order."""
    keep = []
    row_kinds = {"last": ("last",), "query": ("query",), "both": ("last", "query")}[config.rows]
    for i, name in enumerate(table.names):
        if ":" in name:
            kind, head = name.split(":", 1)
            layer = int(head[1 : head.index("H")])
            if (
                config.attention
                and kind in row_kinds
                and (config.layers is None or layer < config.layers)
            ):
                keep.append(i)
        elif name in DENSE_COLUMNS:
            if config.dense:
                keep.append(i)
        elif config.lexical:
            keep.append(i)
    return tuple(table.names[i] for i in keep), table.x[:, keep]


def design(table: FeatureTable, config: ProbeConfig) -> tuple[tuple[str, ...], np.ndarray]:
    """The probe's input columns (names) and the learner's matrix: selected, pooled, normalised
    per question, exactly as :meth:`Probe.transform` does at inference."""
    names, raw = select_columns(table, config)
    if config.pool == "layer":
        _, raw = pool_layers(names, raw)
    return names, normalise_groups(raw, table.groups, config.normalise)


def normalise_groups(x: np.ndarray, groups: np.ndarray, normalise: str) -> np.ndarray:
    """:func:`~ragattn.compress.probe.per_question` applied to each question's rows (as at
    inference, where one call is one question)."""
    if normalise == "none":
        return x
    out = np.empty((x.shape[0], x.shape[1] * (2 if normalise == "both" else 1)))
    bounds = np.flatnonzero(np.diff(groups)) + 1
    for lo, hi in zip(
        np.concatenate([[0], bounds]), np.concatenate([bounds, [len(groups)]]), strict=True
    ):
        out[lo:hi] = per_question(x[lo:hi], normalise)
    return out


def _trees_of(model: Any) -> Trees:
    """Export a fitted binary ``HistGradientBoostingClassifier`` as node arrays."""
    parts = [predictors[0].nodes for predictors in model._predictors]
    offsets = np.cumsum([0] + [len(n) for n in parts[:-1]])
    cat = np.concatenate(parts)
    shift = np.concatenate([np.full(len(n), o) for n, o in zip(parts, offsets, strict=True)])
    leaf = cat["is_leaf"].astype(bool)
    return Trees(
        feature=cat["feature_idx"].astype(np.int64),
        threshold=cat["num_threshold"].astype(np.float64),
        left=np.where(leaf, 0, cat["left"].astype(np.int64) + shift),
        right=np.where(leaf, 0, cat["right"].astype(np.int64) + shift),
        leaf=leaf,
        value=cat["value"].astype(np.float64),
        missing_left=cat["missing_go_to_left"].astype(bool),
        roots=offsets.astype(np.int64),
        baseline=float(np.ravel(model._baseline_prediction)[0]),
    )


def fit_model(x: np.ndarray, y: np.ndarray, config: ProbeConfig) -> Any:
    """A scikit-learn model for ``config`` fitted on (already normalised) ``x``."""
    if config.learner == "trees":
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(
            max_iter=200,
            learning_rate=0.1,
            max_leaf_nodes=31,
            min_samples_leaf=40,
            l2_regularization=1.0,
            class_weight="balanced",
            early_stopping=False,
            random_state=0,
        )
        return model.fit(x, y)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(
        StandardScaler(),
        LogisticRegression(C=config.c, max_iter=3000, class_weight="balanced"),
    )
    return model.fit(x, y)


def train(table: FeatureTable, config: ProbeConfig, *, dtype: str) -> Probe:
    """Fit ``config`` on the whole table and keep only arrays (the runtime needs no
    scikit-learn)."""
    names, x = design(table, config)
    model = fit_model(x, table.y, config)
    if config.learner == "trees":
        trees = _trees_of(model)
        expected = model.decision_function(x[:2000])
        got = trees.logit(x[:2000])
        if not np.allclose(got, expected, atol=1e-6):
            raise ValueError("exported trees disagree with scikit-learn's decision function")
        zeros = np.zeros(x.shape[1])
        return Probe(
            names=names,
            mean=zeros,
            scale=np.ones(x.shape[1]),
            coef=zeros,
            intercept=0.0,
            config=config.as_dict(dtype),
            trees=trees,
        )
    scaler, logreg = model.steps[0][1], model.steps[1][1]
    scale = scaler.scale_.copy()
    return Probe(
        names=names,
        mean=scaler.mean_.copy(),
        scale=scale,
        coef=logreg.coef_[0].astype(np.float64),
        intercept=float(logreg.intercept_[0]),
        config=config.as_dict(dtype),
    )


def cv_r_precision(table: FeatureTable, config: ProbeConfig, *, folds: int = 5) -> float:
    """Mean R-precision per question over grouped folds (a question never spans two folds);
    questions without a positive sentence are trained on but not scored."""
    from sklearn.model_selection import GroupKFold

    _, x = design(table, config)
    y, groups = table.y, table.groups
    scores = []
    for tr, te in GroupKFold(n_splits=folds).split(x, y, groups):
        model = fit_model(x[tr], y[tr], config)
        p = model.decision_function(x[te])
        g_te, y_te = groups[te], y[te]
        for g in np.unique(g_te):
            m = g_te == g
            r = int(y_te[m].sum())
            if r:
                top = np.argsort(-p[m], kind="stable")[:r]
                scores.append(float(y_te[m][top].sum()) / r)
    return float(np.mean(scores))
