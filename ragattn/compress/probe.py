"""A Sentinel-style sentence probe over named features, stored as plain arrays (``.npz``).

Two learners, both trained by ``ragattn probe train`` (scikit-learn, in
:mod:`ragattn.lab.probe_fit`) and applied here without scikit-learn:

- ``logreg``: ``p(keep) = sigmoid(w · (x − mean) / scale + b)``, a standardised L2 logistic
  regression;
- ``trees``: a gradient-boosted tree ensemble (scikit-learn's ``HistGradientBoostingClassifier``
  exported as node arrays), ``p(keep) = sigmoid(baseline + Σ_trees leaf value)``.

Before either, attention columns may be averaged over the heads of each layer (``pool``), and the
features of one call (one question's sentences) may be normalised per question
(``normalise``): ``"zscore"`` replaces each column by its z-score over the call's rows, ``"both"``
appends the z-scores to the raw columns. A per-question z-score makes attention features
comparable across contexts of different lengths and topics, as the rerank fusion does per query.

The file holds the feature names and the feature configuration (rows, layers read, weights' dtype),
so a probe is only ever applied to the features it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragattn.devices import probe_accepts_dtype
from ragattn.errors import ConfigError
from ragattn.lexical import sigmoid

Normalise = Literal["none", "zscore", "both"]


def pool_layers(names: tuple[str, ...], matrix: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """Average the attention columns (``kind:L{layer}H{head}``) over the heads of each layer and
    row kind, in first-seen order; other columns pass through. 30 layers x 9 heads become 30
    columns per row kind: far fewer weights to fit, and no single noisy head dominates."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        key = name.rsplit("H", 1)[0] if ":" in name else name
        groups.setdefault(key, []).append(i)
    pooled = [
        matrix[:, idx].mean(axis=1) if len(idx) > 1 else matrix[:, idx[0]]
        for idx in groups.values()
    ]
    return tuple(groups), np.stack(pooled, axis=1) if pooled else matrix[:, :0]


def per_question(matrix: np.ndarray, normalise: str) -> np.ndarray:
    """The probe's input columns for one question's rows (see the module docstring)."""
    if normalise == "none":
        return matrix
    if matrix.shape[0] == 0:
        z = matrix
    else:
        std = matrix.std(axis=0)
        z = (matrix - matrix.mean(axis=0)) / np.where(std < 1e-9, 1.0, std)
    if normalise == "zscore":
        return z
    if normalise == "both":
        return np.concatenate([matrix, z], axis=1)
    raise ConfigError(f"unknown probe normalisation {normalise!r}; use none, zscore or both")


@dataclass(frozen=True, slots=True, kw_only=True)
class Trees:
    """A boosted tree ensemble as flat node arrays; ``roots[t]`` is tree t's root node.

    A row goes left at a split node when ``x[feature] <= threshold`` (NaN goes where
    ``missing_left`` says); the logit is ``baseline`` plus the sum of the leaf values reached.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray
    value: np.ndarray
    missing_left: np.ndarray
    roots: np.ndarray
    baseline: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        out = np.full(x.shape[0], self.baseline, dtype=np.float64)
        rows = np.arange(x.shape[0])
        for root in self.roots:
            node = np.full(x.shape[0], int(root), dtype=np.int64)
            active = ~self.leaf[node]
            while active.any():
                n = node[active]
                v = x[rows[active], self.feature[n]]
                go_left = np.where(np.isnan(v), self.missing_left[n], v <= self.threshold[n])
                node[active] = np.where(go_left, self.left[n], self.right[n])
                active = ~self.leaf[node]
            out += self.value[node]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "tree_feature": self.feature,
            "tree_threshold": self.threshold,
            "tree_left": self.left,
            "tree_right": self.right,
            "tree_leaf": self.leaf,
            "tree_value": self.value,
            "tree_missing_left": self.missing_left,
            "tree_roots": self.roots,
            "tree_baseline": np.asarray([self.baseline]),
        }

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray]) -> Trees:
        return cls(
            feature=data["tree_feature"],
            threshold=data["tree_threshold"],
            left=data["tree_left"],
            right=data["tree_right"],
            leaf=data["tree_leaf"],
            value=data["tree_value"],
            missing_left=data["tree_missing_left"],
            roots=data["tree_roots"],
            baseline=float(data["tree_baseline"][0]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """A trained sentence probe; ``config`` says how to compute its features and which learner.

    ``names`` are the feature columns it reads (a subset of what the feature extractor computes:
    a layer- or head-restricted probe reads fewer). ``mean``/``scale``/``coef``/``intercept`` are
    the logistic regression over the normalised columns; ``trees`` replaces them when set.
    """

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    config: Mapping[str, Any] = field(default_factory=dict)
    trees: Trees | None = None

    @property
    def normalise(self) -> str:
        return str(self.config.get("normalise", "none"))

    def transform(self, matrix: np.ndarray) -> np.ndarray:
        """The learner's input from the probe's own columns of one question: head pooling
        (``config["pool"] == "layer"``), then the per-question normalisation."""
        if self.config.get("pool") == "layer":
            _, matrix = pool_layers(self.names, matrix)
        return per_question(matrix, self.normalise)

    def check_features(self, config: Mapping[str, Any]) -> None:
        """Refuse features computed with another configuration than the probe was trained on.

        Wider features are accepted: ``rows="both"`` holds the last and the query rows, and more
        layers hold the probe's layers (early exit leaves those columns unchanged); the probe then
        reads its own columns by name. The weights' dtype follows
        :func:`ragattn.devices.probe_accepts_dtype`: float32 and bfloat16 features are
        interchangeable either way (a probe fitted on one reads the other's features, which agree
        within a tested tolerance), int8 features only match an int8 probe.

        Raises:
            ConfigError: rows, layers or dtype that do not hold the probe's features.
        """
        if not self.config.get("attention", False):
            return
        want_rows, got_rows = self.config.get("rows"), config.get("rows")
        want_layers, got_layers = self.config.get("layers"), config.get("layers")
        want_dtype, got_dtype = self.config.get("dtype"), config.get("dtype")
        problems = {
            "rows": want_rows is not None and got_rows not in (want_rows, "both"),
            "layers": want_layers is not None
            and (got_layers is None or int(got_layers) < int(want_layers)),
            "dtype": not probe_accepts_dtype(want_dtype, got_dtype),
        }
        for key, bad in problems.items():
            if bad:
                raise ConfigError(
                    f"the probe was trained on attention features with {key}="
                    f"{self.config.get(key)!r}, but these were computed with {key}="
                    f"{config.get(key)!r}; retrain it with: ragattn probe train"
                )

    def columns(self, names: tuple[str, ...]) -> list[int]:
        """Indices of the probe's features among ``names``."""
        if names == self.names:
            return list(range(len(names)))
        where = {n: i for i, n in enumerate(names)}
        missing = [n for n in self.names if n not in where]
        if missing:
            raise ConfigError(
                f"the probe was trained on different features than were computed "
                f"({len(missing)} missing, e.g. {missing[0]!r})"
            )
        return [where[n] for n in self.names]

    def predict(
        self,
        names: tuple[str, ...],
        matrix: np.ndarray,
        config: Mapping[str, Any] | None = None,
    ) -> np.ndarray:
        """Keep probabilities in [0, 1], one per row of ``matrix`` (one question's sentences).

        Args:
            names: the column names of ``matrix``; must include every feature of the probe.
            matrix: ``[n_sentences, len(names)]`` features of one question.
            config: the features' configuration (:attr:`SentenceFeatures.config`); checked when
                given.
        """
        if config is not None:
            self.check_features(config)
        if matrix.shape[0] == 0:
            return np.zeros(0)
        x = self.transform(matrix[:, self.columns(names)])
        if self.trees is not None:
            return sigmoid(self.trees.logit(x))
        z = (x - self.mean) / self.scale
        return sigmoid(z @ self.coef + self.intercept)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "names": np.asarray(self.names),
            "mean": self.mean,
            "scale": self.scale,
            "coef": self.coef,
            "intercept": np.asarray([self.intercept]),
            "config": np.asarray(json.dumps(dict(self.config))),
        }
        if self.trees is not None:
            arrays.update(self.trees.arrays())
        np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool

    @classmethod
    def load(cls, path: Path) -> Probe:
        if not path.is_file():
            raise ConfigError(
                f"probe weights not found at {path}; train them with: ragattn probe train"
            )
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        return cls(
            names=tuple(str(n) for n in arrays["names"]),
            mean=arrays["mean"],
            scale=arrays["scale"],
            coef=arrays["coef"],
            intercept=float(arrays["intercept"][0]),
            config=json.loads(str(arrays["config"])),
            trees=Trees.from_arrays(arrays) if "tree_roots" in arrays else None,
        )
