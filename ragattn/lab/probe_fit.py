"""Fitting the sentence probes on features of the training material
(:mod:`ragattn.lab.probe_training`), read through a
:class:`~ragattn.lab.feature_store.FeatureStore`: column selection and per-question normalisation
exactly as :class:`~ragattn.compress.probe.Probe` reads them at inference, the logistic-regression
or boosted-trees fit, and grouped cross-validation (a question never spans two folds). The fitted
probe keeps only arrays: the runtime needs no scikit-learn.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from ragattn.compress.features import Rows
from ragattn.compress.probe import Normalise, Probe, Trees, per_question, pool_layers
from ragattn.lab.feature_store import FeatureStore
from ragattn.lab.probe_training import LabelledExample, units_and_labels


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


__all__ = [
    "DENSE_COLUMNS",
    "ExtractionStats",
    "FeatureTable",
    "Learner",
    "ProbeConfig",
    "cv_r_precision",
    "design",
    "extract",
    "fit_model",
    "normalise_groups",
    "select_columns",
    "train",
]
