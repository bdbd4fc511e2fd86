"""A Sentinel-style logistic probe over sentence features, stored as plain arrays (``.npz``).

``p(keep) = sigmoid(w · (x − mean) / scale + b)``: a standardised logistic regression, trained by
``ragattn probe train`` (scikit-learn, in :mod:`ragattn.lab.probe_training`) and loaded here
without scikit-learn. The file holds the feature names and the feature configuration, so a probe
can only be applied to the features it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.errors import ConfigError
from ragattn.lexical import sigmoid


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """Standardised logistic regression over named features; ``config`` says how to compute them."""

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    config: Mapping[str, Any] = field(default_factory=dict)

    def predict(self, names: tuple[str, ...], matrix: np.ndarray) -> np.ndarray:
        """Keep probabilities in [0, 1], one per row of ``matrix``."""
        if names != self.names:
            raise ConfigError("the probe was trained on different features than were computed")
        if matrix.shape[0] == 0:
            return np.zeros(0)
        z = (matrix - self.mean) / self.scale
        return sigmoid(z @ self.coef + self.intercept)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            names=np.asarray(self.names),
            mean=self.mean,
            scale=self.scale,
            coef=self.coef,
            intercept=np.asarray([self.intercept]),
            config=np.asarray(json.dumps(dict(self.config))),
        )

    @classmethod
    def load(cls, path: Path) -> Probe:
        if not path.is_file():
            raise ConfigError(
                f"probe weights not found at {path}; train them with: ragattn probe train"
            )
        with np.load(path, allow_pickle=False) as data:
            return cls(
                names=tuple(str(n) for n in data["names"]),
                mean=data["mean"],
                scale=data["scale"],
                coef=data["coef"],
                intercept=float(data["intercept"][0]),
                config=json.loads(str(data["config"])),
            )
