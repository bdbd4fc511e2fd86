"""Fitting the document-aware selection (``ragattn probe train --kind selection``).

The training rows are the sentences of the multi-document training questions (HotpotQA train,
2Wiki after the evaluation slice, MuSiQue train with sentence labels by
:data:`~ragattn.lab.probe_training.MUSIQUE_RULE`, SciFact train and NQ-open with their distractor
passages; :data:`SELECTION_QUOTAS`). Each row holds the three inputs of
:func:`ragattn.compress.selection.combination_inputs`, read from the same features the runtime
computes: the packaged sentence probe's keep probability and the packaged document probe's score
of the sentence's document. A logistic regression over them is scored by grouped cross-validation
(folds by question) on the runtime's own measure, recall of gold sentences at 20 % of the proxy
tokens, beside the sentence probe alone; then it is fitted on every question and written to
``models/<proxy>/selection.json`` with a card section in ``README.md``.

The sentence probe was fitted on most of these questions (all but MuSiQue), so its scores are a
little more confident here than on new data; the per-source table keeps MuSiQue, which it never
saw, apart.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from tqdm import tqdm

from ragattn.assets import proxy_slug
from ragattn.compress.budget import Budget, select
from ragattn.compress.links import link_inputs
from ragattn.compress.model_files import probe_path
from ragattn.compress.probe import Probe
from ragattn.compress.selection import (
    COLUMNS,
    LINKED_COLUMNS,
    SELECTION_FILE,
    DocumentScore,
    DocumentSelection,
    combination_inputs,
)
from ragattn.document_probe import DocumentProbe, document_probe_path, score_documents
from ragattn.lab.feature_store import FeatureStore
from ragattn.lab.probe_training import (
    MUSIQUE_RULE,
    LabelledExample,
    load_training,
    units_and_labels,
)
from ragattn.lab.profile_writers import replace_card_section
from ragattn.lexical import sigmoid
from ragattn.proxy import Proxy
from ragattn.sentence_attention import Unit, unit_widths

CARD_START = "<!-- selection:start -->"
CARD_END = "<!-- selection:end -->"

SELECTION_QUOTAS: Mapping[str, int] = MappingProxyType(
    {
        "hotpotqa-train": 100,
        "2wiki-train": 200,
        "musique-train": 100,
        "scifact-train": 150,
        "nq-train": 150,
    }
)
"""Multi-document training questions per source (at most)."""
BUDGET = 0.2
"""The token budget of the choosing measure (recall at 20 % of the context's proxy tokens)."""
C = 1.0
"""L2 strength (sklearn's ``C``) of the logistic regression."""
LINK_GAIN = 0.01
"""The title links (:mod:`ragattn.compress.links`) are written into the combination only when
they raise the grouped-CV macro recall by at least this much (1 point) over the three inputs
without them; declared before they were first measured."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionExample:
    """One question's rows: the combination inputs (the three of
    :data:`~ragattn.compress.selection.COLUMNS`, then the title links), the sentence
    probabilities, the gold labels and each sentence's width in proxy tokens."""

    source: str
    x: np.ndarray
    probability: np.ndarray
    y: np.ndarray
    widths: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredQuestion:
    """One training question as the runtime scores it: its sentences (units) and gold labels, the
    sentence probe's keep probabilities and the document probe's raw score of each document."""

    example: LabelledExample
    units: list[Unit]
    labels: np.ndarray
    probability: np.ndarray
    document_scores: np.ndarray


def scored_questions(
    proxy: Proxy,
    data_dir: Path,
    store: FeatureStore,
    sentence_probe: Probe,
    document_probe: DocumentProbe,
    *,
    quotas: Mapping[str, int] = SELECTION_QUOTAS,
    limit: int | None = None,
    document_score: DocumentScore = "probe",
    progress: bool = True,
) -> Iterator[ScoredQuestion]:
    """Every multi-document training question with a gold sentence, scored from ``store``
    (features extracted once, then read from disk); ``document_scores`` are the document
    probe's (``document_score="probe"``) or its attention correction alone (``"attention"``)."""
    examples = [
        ex
        for ex in load_training(data_dir, quotas=quotas)
        if len(ex.documents) > 1 and any(ex.gold)
    ][:limit]
    for ex in tqdm(examples, desc="selection", unit="q", disable=not progress):
        units, labels = units_and_labels(ex)
        if not labels.any():
            continue
        feats, _ = store.get(ex.source, ex.question, ex.documents, units)
        probability = sentence_probe.predict(feats.names, feats.matrix, feats.config)
        raw = score_documents(
            document_probe,
            proxy.tokenizer,
            ex.question,
            ex.documents,
            units,
            feats.names,
            feats.matrix,
            feats.config,
            minilm=document_score == "probe",
        )
        yield ScoredQuestion(
            example=ex,
            units=units,
            labels=labels,
            probability=probability,
            document_scores=np.asarray(raw, dtype=np.float64),
        )


def build_examples(proxy: Proxy, questions: Iterable[ScoredQuestion]) -> list[SelectionExample]:
    """The combination's rows of each scored question (:func:`scored_questions`): the three
    inputs of :data:`~ragattn.compress.selection.COLUMNS`, then the title links."""
    out = []
    for q in questions:
        ex, units = q.example, q.units
        base = combination_inputs(q.probability, [u.doc for u in units], q.document_scores)
        links = link_inputs(ex.question, ex.documents, units, q.probability)
        out.append(
            SelectionExample(
                source=ex.source,
                x=np.concatenate([base, links], axis=1),
                probability=q.probability,
                y=q.labels,
                widths=unit_widths(proxy.tokenizer, ex.documents, units),
            )
        )
    return out


def recall_at_budget(
    scores: np.ndarray, y: np.ndarray, widths: np.ndarray, budget: float = BUDGET
) -> float:
    """Recall of gold units when :func:`ragattn.compress.budget.select` keeps units under
    ``budget`` of the tokens (best first; a unit that does not fit is skipped)."""
    costs = [int(w) for w in widths]
    kept = select(
        [float(v) for v in scores],
        costs,
        Budget(kind="ratio", value=budget),
        sum(costs),
        lambda units: sum(costs[i] for i in units),
    )
    return float(y[kept].sum() / y.sum())


def _fit(
    examples: Sequence[SelectionExample], c: float = C, columns: int = len(COLUMNS)
) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([e.x[:, :columns] for e in examples])
    y = np.concatenate([e.y for e in examples])
    model = LogisticRegression(C=c, max_iter=2000).fit(x, y)
    return model.coef_[0].astype(np.float64), float(model.intercept_[0])


def cross_validate(
    examples: Sequence[SelectionExample], *, folds: int = 5, c: float = C
) -> dict[str, dict[str, float]]:
    """Grouped (by question) CV recall at :data:`BUDGET`, per source and macro over sources:
    ``{"sentences": {...}, "documents": {...}, "links": {...}}`` (the sentence probe alone; the
    combination of the three inputs, then with the title links, fitted on the other folds)."""
    from sklearn.model_selection import GroupKFold

    index = np.arange(len(examples))
    combined = {k: np.zeros(len(examples)) for k in (len(COLUMNS), len(LINKED_COLUMNS))}
    for train_idx, test_idx in GroupKFold(n_splits=folds).split(index, groups=index):
        for k, values in combined.items():
            w, b = _fit([examples[i] for i in train_idx], c, k)
            for i in test_idx:
                e = examples[i]
                values[i] = recall_at_budget(sigmoid(e.x[:, :k] @ w + b), e.y, e.widths)
    base = np.array([recall_at_budget(e.probability, e.y, e.widths) for e in examples])
    sources = sorted({e.source for e in examples})
    out: dict[str, dict[str, float]] = {}
    runs = (
        ("sentences", base),
        ("documents", combined[len(COLUMNS)]),
        ("links", combined[len(LINKED_COLUMNS)]),
    )
    for name, values in runs:
        per = {
            s: float(np.mean([v for v, e in zip(values, examples, strict=True) if e.source == s]))
            for s in sources
        }
        per["macro"] = float(np.mean([per[s] for s in sources]))
        out[name] = per
    return out


def fit_selection(
    proxy: Proxy,
    data_dir: Path,
    out_dir: Path,
    *,
    store: FeatureStore,
    models_dir: Path,
    method: str = "sentinel",
    limit: int | None = None,
    document_score: DocumentScore = "probe",
    command: str = "ragattn probe train --kind selection",
    progress: bool = True,
) -> str:
    """Build the rows (resumable extraction), cross-validate, fit on every question, write
    ``selection.json`` and the card section; returns the card text. ``models_dir`` holds the
    sentence probe of ``method`` and the document probe that the rows are read with;
    ``document_score`` is the document input the selection is fitted on (and reads at run
    time, :data:`~ragattn.compress.selection.DocumentScore`)."""
    slug = proxy_slug(proxy)
    sentence_probe = Probe.load(probe_path(models_dir, proxy.name, method))
    document_probe = DocumentProbe.load(document_probe_path(models_dir, slug))
    examples = build_examples(
        proxy,
        scored_questions(
            proxy,
            data_dir,
            store,
            sentence_probe,
            document_probe,
            limit=limit,
            document_score=document_score,
            progress=progress,
        ),
    )
    cv = cross_validate(examples)
    with_links = cv["links"]["macro"] >= cv["documents"]["macro"] + LINK_GAIN
    columns = LINKED_COLUMNS if with_links else COLUMNS
    w, b = _fit(examples, C, len(columns))
    counts = Counter(e.source for e in examples)
    positives: Counter[str] = Counter()
    for e in examples:
        positives[e.source] += int(e.y.sum())
    config: dict[str, Any] = {
        "method": method,
        "document_score": document_score,
        "budget": BUDGET,
        "C": C,
        "questions": dict(sorted(counts.items())),
        "positives": dict(sorted(positives.items())),
        "cv_recall": cv,
        "title_links": with_links,
        "musique_rule": MUSIQUE_RULE,
        "command": command,
    }
    selection = DocumentSelection(
        weights=tuple(float(v) for v in w), bias=b, config=config, columns=columns
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    selection.save(out_dir / SELECTION_FILE)
    card = _card(proxy, selection, counts, positives, cv, command)
    replace_card_section(
        out_dir / "README.md", f"{CARD_START}\n{card}{CARD_END}", CARD_START, CARD_END
    )
    return card


def _card(
    proxy: Proxy,
    selection: DocumentSelection,
    counts: Mapping[str, int],
    positives: Mapping[str, int],
    cv: Mapping[str, Mapping[str, float]],
    command: str,
) -> str:
    pct = int(BUDGET * 100)
    weights = ", ".join(
        f"{n} {v:+.3f}" for n, v in zip(selection.columns, selection.weights, strict=True)
    )
    gain = 100 * (cv["links"]["macro"] - cv["documents"]["macro"])
    verdict = "so they are read" if selection.uses_links else "so they are not read"
    lines = [
        f"# Document-aware selection for `{proxy.name}` (`{SELECTION_FILE}`, method "
        f"`{selection.method}`)",
        "",
        f"Written by `{command}` on {dt.date.today().isoformat()}.",
        "With several documents, a sentence's keep score is `sigmoid(w . x + bias)` over its "
        "sentence probe's log-odds, its document's "
        + (
            "document-probe score (MiniLM cosine plus attention; "
            if selection.reads_minilm
            else "attention correction alone (no MiniLM pass; "
        )
        + "z-scored over the call's documents) and its document's best sentence log-odds "
        "minus the call's best (`ragattn/compress/selection.py`), and optionally the two "
        "title links of `ragattn/compress/links.py`. One document keeps the sentence probe's "
        "score.",
        f"Weights: {weights}; bias {selection.bias:+.3f}; L2 C = {C}.",
        f"Title links: {gain:+.1f} points of CV macro recall (read only at >= "
        f"{100 * LINK_GAIN:.0f}), {verdict}.",
        f"MuSiQue sentence labels: {MUSIQUE_RULE}",
        "",
        f"Grouped CV (5 folds by question), recall of gold sentences at {pct} % of the proxy "
        "tokens:",
        "",
        "| source | questions | gold sentences | sentence probe alone | document-aware | "
        "with title links |",
        "|---|---|---|---|---|---|",
        *[
            f"| {s} | {counts[s]} | {positives[s]} | {cv['sentences'][s]:.3f} | "
            f"{cv['documents'][s]:.3f} | {cv['links'][s]:.3f} |"
            for s in sorted(counts)
        ],
        f"| **macro** | **{sum(counts.values())}** | **{sum(positives.values())}** | "
        f"**{cv['sentences']['macro']:.3f}** | **{cv['documents']['macro']:.3f}** | "
        f"**{cv['links']['macro']:.3f}** |",
        "",
    ]
    return "\n".join(lines)


__all__: Sequence[str] = (
    "BUDGET",
    "LINK_GAIN",
    "SELECTION_QUOTAS",
    "ScoredQuestion",
    "SelectionExample",
    "build_examples",
    "cross_validate",
    "fit_selection",
    "recall_at_budget",
    "scored_questions",
)
