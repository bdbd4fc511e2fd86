"""Learned rerank profiles: QRHead head sets and the fused (attention + BM25 + MiniLM + rank)
scorer.

A profile (``models/<proxy>/rerank-profile.json``, written by ``ragattn heads select``) holds the
selected heads and two logistic fusions: with the attention feature and without it (the ablation
"attention switched off"). Features are z-scored within the query's candidate list, so the weights
transfer across lists of different sizes. ``raw_score`` is the fusion's log-odds of relevance;
``relevance_score = sigmoid(raw_score)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragattn.attention import HeadSet
from ragattn.errors import ModelLoadError
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores, sigmoid
from ragattn.rerank.icr import AttentionMemo, WindowedAttention
from ragattn.rerank.training import (
    bm25_local,
    dense_local,
    fusion_features,
    head_masses,
    rank_prior,
)
from ragattn.types import Document


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankProfile:
    heads: HeadSet
    coef: dict[str, np.ndarray]
    intercept: dict[str, float]

    @classmethod
    def load(cls, path: Path) -> RerankProfile:
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


def profile_path(models_dir: Path, slug: str) -> Path:
    return models_dir / slug / "rerank-profile.json"


class FusedScorer:
    """Logistic fusion of QRHead attention (optional), candidate-local BM25, MiniLM and rank
    prior."""

    def __init__(
        self,
        proxy: Proxy,
        profile: RerankProfile,
        *,
        attention: bool = True,
        name: str = "fused",
        memo: AttentionMemo | None = None,
    ) -> None:
        self.name = name
        self.attention = attention
        self.key = "attention" if attention else "lexical"
        self.profile = profile
        self.windows = WindowedAttention(proxy, profile.heads, memo=memo) if attention else None

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int]
    ) -> DocScores:
        att = None
        warnings: list[str] = []
        windows = 1
        if self.windows is not None:
            masses, windows, warnings = head_masses(
                self.windows, query, documents, first_stage_order
            )
            att = masses.sum(axis=1)
        x = fusion_features(
            att,
            bm25_local(query, documents),
            dense_local(query, documents),
            rank_prior(first_stage_order),
        )
        raw = x @ self.profile.coef[self.key] + self.profile.intercept[self.key]
        return DocScores(raw=raw, relevance=sigmoid(raw), windows=windows, warnings=tuple(warnings))
