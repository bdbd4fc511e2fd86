"""Fitting every probe method on one feature table, choosing C by grouped cross-validation, and
writing the weights with a model card (data, command, metrics) under ``models/<proxy>/``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ragattn.compress.features import FeatureSet
from ragattn.lab.probe_training import FeatureTable, extract, load_training, select_columns, train
from ragattn.proxy import Proxy

C_GRID = (0.01, 0.1, 1.0)


def _save_table(path: Path, table: FeatureTable) -> None:
    np.savez_compressed(
        path,
        names=np.asarray(table.names),
        x=table.x,
        y=table.y,
        groups=table.groups,
        sources=np.asarray(table.sources),
    )


def _load_table(path: Path) -> FeatureTable:
    with np.load(path, allow_pickle=False) as d:
        return FeatureTable(
            names=tuple(str(n) for n in d["names"]),
            x=d["x"],
            y=d["y"],
            groups=d["groups"],
            sources=tuple(str(s) for s in d["sources"]),
        )


def _cv_r_precision(x: np.ndarray, y: np.ndarray, groups: np.ndarray, c: float) -> float:
    """Mean R-precision per question over 5 grouped folds (questions never split across folds)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores = []
    for tr, te in GroupKFold(n_splits=5).split(x, y, groups):
        model = make_pipeline(
            StandardScaler(), LogisticRegression(C=c, max_iter=2000, class_weight="balanced")
        )
        model.fit(x[tr], y[tr])
        p = model.decision_function(x[te])
        for g in np.unique(groups[te]):
            m = groups[te] == g
            r = int(y[te][m].sum())
            if r:
                top = np.argsort(-p[m], kind="stable")[:r]
                scores.append(float(y[te][m][top].sum()) / r)
    return float(np.mean(scores))


def fit_all(
    proxy: Proxy,
    data_dir: Path,
    out_dir: Path,
    *,
    per_source: int,
    features_cache: Path | None,
    methods: Mapping[str, FeatureSet],
) -> str:
    """Fit each probe method; returns the model card text (also written to
    ``out_dir/README.md``)."""
    if features_cache and features_cache.is_file():
        table = _load_table(features_cache)
    else:
        table = extract(proxy, load_training(data_dir, per_source=per_source))
        if features_cache:
            _save_table(features_cache, table)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for s in table.sources:
        counts[s] = counts.get(s, 0) + 1
    rows = []
    for name, spec in methods.items():
        flags = {"attention": spec.attention, "lexical": spec.lexical, "dense": spec.dense}
        _, x = select_columns(table, **flags)
        cv = {c: _cv_r_precision(x, table.y, table.groups, c) for c in C_GRID}
        best = max(cv, key=lambda c: cv[c])
        probe = train(table, c=best, config={**flags, "rows": "last", "C": best}, **flags)
        probe.save(out_dir / f"{name}.npz")
        rows.append(
            f"| {name} | {len(probe.names)} | {best} | "
            + " | ".join(f"{cv[c]:.3f}" for c in C_GRID)
            + " |"
        )
    card = "\n".join(
        [
            f"# Sentence probes for `{proxy.name}`",
            "",
            f"Written by `ragattn probe train --per-source {per_source}` "
            f"on {dt.date.today().isoformat()}.",
            "Standardised, class-balanced, L2 logistic regressions over per-sentence features",
            "(`ragattn/compress/features.py`); "
            "C chosen by 5-fold grouped CV (R-precision per question).",
            "",
            "Training questions per source "
            "(evaluation questions excluded; see `ragattn/lab/probe_training.py`):",
            "",
            *[f"- {k}: {v}" for k, v in sorted(counts.items())],
            "- (MuSiQue labels paragraphs only and gives no sentence-labelled example)",
            f"- sentences: {len(table.y)}, positive: {int(table.y.sum())}",
            "",
            "| method | features | C | " + " | ".join(f"CV R-prec C={c}" for c in C_GRID) + " |",
            "|---|---|---|" + "---|" * len(C_GRID),
            *rows,
            "",
        ]
    )
    (out_dir / "README.md").write_text(card)
    return card
