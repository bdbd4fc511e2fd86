"""The fused scorer: a learned logistic fusion of QRHead attention (optional), candidate-local
BM25, MiniLM and the first-stage rank prior.

The weights come from the proxy's rerank profile (:mod:`ragattn.rerank.profiles`): one fusion with
the attention feature and one without it (the ablation "attention switched off", which needs no
proxy forward at all). Features are z-scored within the query's candidate list
(:func:`~ragattn.rerank.features.fusion_features`). ``raw_score`` is the fusion's log-odds of
relevance; ``relevance_score = sigmoid(raw_score)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragattn.errors import ConfigError
from ragattn.lexical import sigmoid
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores
from ragattn.rerank.features import (
    bm25_local,
    dense_local,
    fusion_features,
    head_masses,
    rank_prior,
)
from ragattn.rerank.icr import AttentionMemo, WindowedAttention
from ragattn.rerank.profiles import RerankProfile
from ragattn.types import Document


class FusedScorer:
    """Logistic fusion of QRHead attention (when ``attention``), candidate-local BM25, MiniLM and
    rank prior. ``proxy`` may be None only when ``attention`` is off."""

    def __init__(
        self,
        proxy: Proxy | None,
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
        self.windows: WindowedAttention | None = None
        if attention:
            if proxy is None:
                raise ConfigError(f"rerank method {name!r} reads attention and needs a proxy")
            self.windows = WindowedAttention(proxy, profile.heads, memo=memo)

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
