"""Loading the learned rerank assets of a proxy: the rerank profile and the retrieval-head profile.

- ``models/<proxy>/rerank-profile.json`` (written by ``ragattn heads select``): the QRHead head set
  and two logistic fusions over z-scored candidate features, with the attention feature
  (``"attention"``) and without it (``"lexical"``).
- ``models/<proxy>/retrieval-heads.json`` (written by ``ragattn heads detect``): Wu et al.'s
  retrieval heads with every head's copy-paste score.

Both are only *read* here; :mod:`ragattn.lab` fits and writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragattn.assets import default_models_dir, proxy_slug
from ragattn.attention import HeadSet
from ragattn.errors import ModelLoadError
from ragattn.proxy import Proxy

PROFILE_FILENAME = "rerank-profile.json"
RETRIEVAL_FILENAME = "retrieval-heads.json"


def profile_path(models_dir: Path, slug: str) -> Path:
    """Where the rerank profile of the proxy ``slug`` lives under ``models_dir``."""
    return models_dir / slug / PROFILE_FILENAME


def retrieval_profile_path(models_dir: Path, slug: str) -> Path:
    """Where the retrieval-head profile of the proxy ``slug`` lives under ``models_dir``."""
    return models_dir / slug / RETRIEVAL_FILENAME


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankProfile:
    """QRHead heads and the fusion weights by key (``"attention"``, ``"lexical"``).

    ``coef[key]`` are the logistic weights of :func:`ragattn.rerank.features.fusion_features`'
    columns and ``intercept[key]`` its bias; their output is a log-odds of relevance.
    """

    heads: HeadSet
    coef: dict[str, np.ndarray]
    intercept: dict[str, float]

    @classmethod
    def load(cls, path: Path) -> RerankProfile:
        """Read a profile file.

        Raises:
            ModelLoadError: the file is missing (the message names ``ragattn heads select``).
        """
        if not path.is_file():
            raise ModelLoadError(
                f"no rerank profile at {path}; create it with: ragattn heads select"
            )
        data = json.loads(path.read_text())
        return cls(
            heads=HeadSet(tuple((int(layer), int(h)) for layer, h in data["heads"])),
            coef={k: np.asarray(v["coef"], dtype=np.float64) for k, v in data["fusion"].items()},
            intercept={k: float(v["intercept"]) for k, v in data["fusion"].items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalHeadProfile:
    """Selected retrieval heads of one proxy.

    ``ranked`` lists the selected ``((layer, head), score)`` best first; ``scores`` is the full
    ``[layers, heads]`` matrix of retrieval scores (fraction of needle tokens copied, in [0, 1]).
    """

    proxy: str
    heads: HeadSet
    ranked: tuple[tuple[tuple[int, int], float], ...]
    scores: np.ndarray

    @classmethod
    def load(cls, path: Path) -> RetrievalHeadProfile:
        """Read a profile file.

        Raises:
            ModelLoadError: the file is missing (the message names ``ragattn heads detect``).
        """
        if not path.is_file():
            raise ModelLoadError(
                f"no retrieval-head profile at {path}; create it with: ragattn heads detect"
            )
        data = json.loads(path.read_text())
        ranked = tuple(
            ((int(item["layer"]), int(item["head"])), float(item["score"]))
            for item in data["heads"]
        )
        return cls(
            proxy=str(data["proxy"]),
            heads=HeadSet(tuple(p for p, _ in ranked)),
            ranked=ranked,
            scores=np.asarray(data["scores"], dtype=np.float64),
        )


def load_rerank_profile(proxy: Proxy | str, models_dir: Path | None = None) -> RerankProfile:
    """The rerank profile of ``proxy`` (a loaded proxy or its name; only the name is read)."""
    return RerankProfile.load(profile_path(models_dir or default_models_dir(), proxy_slug(proxy)))


def load_retrieval_heads(proxy: Proxy, models_dir: Path | None = None) -> HeadSet:
    """Wu et al. retrieval heads of ``proxy``, checked against its geometry.

    Raises:
        ModelLoadError: no profile (run ``ragattn heads detect``).
        InvalidInputError: the profile names heads outside the proxy's layers x heads.
    """
    path = retrieval_profile_path(models_dir or default_models_dir(), proxy_slug(proxy))
    heads = RetrievalHeadProfile.load(path).heads
    heads.validate(proxy.num_layers, proxy.num_heads)
    return heads


__all__ = [
    "PROFILE_FILENAME",
    "RETRIEVAL_FILENAME",
    "RerankProfile",
    "RetrievalHeadProfile",
    "load_rerank_profile",
    "load_retrieval_heads",
    "profile_path",
    "retrieval_profile_path",
]
