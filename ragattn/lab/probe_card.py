"""Fitting every probe method on one feature table, choosing the learner by grouped
cross-validation, and writing the weights with a model card (data, command, metrics) under
``models/<proxy>/``.

Each method's feature configuration (rows, layers read, per-question normalisation) is declared in
:data:`METHOD_CONFIGS`; it is the outcome of the probe study (``studies/probe_study.py``,
BENCHMARKS.md §3), and it is written into each probe file, so the runtime computes exactly those
features. The learner (logistic-regression strength or boosted trees) is chosen here by CV.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from ragattn.lab.feature_store import FeatureStore
from ragattn.lab.probe_fit import (
    ExtractionStats,
    FeatureTable,
    Learner,
    ProbeConfig,
    cv_r_precision,
    extract,
    train,
)
from ragattn.lab.probe_training import MUSIQUE_RULE, QUOTAS, load_training
from ragattn.lab.profile_writers import replace_card_section
from ragattn.proxy import Proxy

CARD_START = "<!-- probes:start -->"
CARD_END = "<!-- probes:end -->"

_FUSED = ProbeConfig(
    attention=True,
    lexical=True,
    dense=True,
    rows="query",
    layers=None,
    normalise="both",
    pool="none",
)
METHOD_CONFIGS: Mapping[str, ProbeConfig] = MappingProxyType(
    {
        "fused": _FUSED,
        "sentinel": replace(_FUSED, lexical=False, dense=False),
        "lexical": ProbeConfig(attention=False, lexical=True, dense=True, normalise="both"),
    }
)
"""Feature configuration of each probe method (see the module docstring)."""

LEARNERS: Sequence[tuple[Learner, float]] = (("logreg", 0.01), ("logreg", 0.1), ("logreg", 1.0))
"""Learner candidates compared by CV for every method (``("trees", 0)`` adds boosted trees)."""


def _learner_label(learner: str, c: float) -> str:
    return "trees" if learner == "trees" else f"logreg C={c}"


def fit_all(
    proxy: Proxy,
    data_dir: Path,
    out_dir: Path,
    *,
    store: FeatureStore,
    per_source: int | None = None,
    quotas: Mapping[str, int] | None = None,
    limit: int | None = None,
    methods: Sequence[str] = tuple(METHOD_CONFIGS),
    learners: Sequence[tuple[Learner, float]] = LEARNERS,
    folds: int = 5,
    command: str = "ragattn probe train",
) -> str:
    """Extract (or read from ``store``) the training features, fit each probe method with the
    learner that CV prefers, write ``<method>.npz`` and the card (``README.md``) to ``out_dir``;
    returns the card text. ``limit`` keeps the first N questions of the interleaved list (a
    balanced prefix, e.g. the part a slower proxy had time to extract). ``quotas`` overrides
    :data:`~ragattn.lab.probe_training.QUOTAS` for the sources it names."""
    examples = load_training(data_dir, per_source=per_source, quotas={**QUOTAS, **(quotas or {})})[
        :limit
    ]
    table, stats = extract(store, examples)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = str(proxy.dtype).removeprefix("torch.")
    rows = []
    for name in methods:
        base = METHOD_CONFIGS[name]
        cv = {
            (learner, c): cv_r_precision(table, replace(base, learner=learner, c=c), folds=folds)
            for learner, c in learners
        }
        best = max(cv, key=lambda k: cv[k])
        probe = train(table, replace(base, learner=best[0], c=best[1]), dtype=dtype)
        probe.save(out_dir / f"{name}.npz")
        rows.append((name, base, len(probe.names), best, cv))
    card = _card(proxy, table, stats, rows, learners, per_source, quotas, limit, folds, command)
    replace_card_section(
        out_dir / "README.md", f"{CARD_START}\n{card}{CARD_END}", CARD_START, CARD_END, first=True
    )
    return card


def _card(
    proxy: Proxy,
    table: FeatureTable,
    stats: ExtractionStats,
    rows: list,
    learners: Sequence[tuple[Learner, float]],
    per_source: int | None,
    quotas: Mapping[str, int] | None,
    limit: int | None,
    folds: int,
    command: str,
) -> str:
    counts = Counter(table.sources)
    positives: Counter[str] = Counter()
    sentences: Counter[str] = Counter()
    for g, source in enumerate(table.sources):
        mask = table.groups == g
        positives[source] += int(table.y[mask].sum())
        sentences[source] += int(mask.sum())
    quota_line = f"at most {per_source} per source" if per_source else "the quotas of `QUOTAS`"
    if quotas:
        quota_line += " with " + ", ".join(f"{k} {v}" for k, v in sorted(quotas.items()))
    if limit is not None:
        quota_line += f", the first {limit} questions of the interleaved list"
    spq = stats.seconds_per_question
    header = "| method | rows | layers | pool | normalise | features | learner | " + " | ".join(
        f"CV {_learner_label(lr, c)}" for lr, c in learners
    )
    lines = [
        f"# Sentence probes for `{proxy.name}`",
        "",
        f"Written by `{command}` on {dt.date.today().isoformat()} ({quota_line}).",
        f"Class-balanced probes over per-sentence features (`ragattn/compress/features.py`); the "
        f"learner of each method chosen by {folds}-fold grouped CV (R-precision per question; "
        "a question never spans two folds). The feature configuration of each method (rows, "
        "layers, head pooling, normalisation) is in its file and in `ragattn/lab/probe_card.py` "
        "(`METHOD_CONFIGS`); it was chosen on the mean recall of the four shared evaluation sets "
        "by `studies/probe_study.py` (BENCHMARKS.md §3), because CV on the training table "
        "hardly separates the configurations.",
        "",
        "Training questions per source (evaluation questions excluded; see "
        "`ragattn/lab/probe_training.py`):",
        "",
        "| source | questions | sentences | positive |",
        "|---|---|---|---|",
        *[f"| {s} | {counts[s]} | {sentences[s]} | {positives[s]} |" for s in sorted(counts)],
        f"| **all** | **{len(table.sources)}** | **{len(table.y)}** | **{int(table.y.sum())}** |",
        "",
        f"Quotas read: {dict(QUOTAS) | dict(quotas or {})}."
        + (f" MuSiQue sentence labels: {MUSIQUE_RULE}" if counts.get("musique-train") else ""),
        f"Feature extraction this run: {stats.computed} of {stats.examples} questions computed"
        + (f", {spq:.2f} s per question" if spq else " (all read from the feature store)")
        + ".",
        "",
        header + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(learners),
    ]
    for name, base, n_features, best, cv in rows:
        layers = "all" if base.layers is None else f"0–{base.layers - 1}"
        lines.append(
            f"| {name} | {base.rows if base.attention else '–'} | "
            f"{layers if base.attention else '–'} | {base.pool if base.attention else '–'} | "
            f"{base.normalise} | {n_features} | "
            f"{_learner_label(*best)} | " + " | ".join(f"{cv[k]:.3f}" for k in learners) + " |"
        )
    lines.append("")
    return "\n".join(lines)
