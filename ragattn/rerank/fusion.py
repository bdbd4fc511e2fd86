"""The fused scorer: a learned logistic fusion of QRHead attention (optional), candidate-local
BM25, MiniLM and, when the caller passes one, the first stage's rank.

The weights come from the proxy's rerank profile (:mod:`ragattn.rerank.profiles`): fusions with
the attention feature and without it (the ablation "attention switched off", which needs no proxy
forward at all). Features are z-scored within the query's candidate list
(:func:`~ragattn.rerank.features.fusion_features`). ``raw_score`` is the fusion's log-odds of
relevance; ``relevance_score = sigmoid(raw_score)``.

Input position is never read as a ranking. A first-stage order is used only when the caller passes
``first_stage_order``: then the rank prior ``1/log2(rank+1)`` is a feature (profile keys
``attention`` / ``lexical``). Without it:

- ``fused-no-attention`` uses the order-free fusion of BM25 and MiniLM alone (key
  ``lexical-order-free``), so its ranking does not depend on the input order at all;
- ``fused`` (listwise attention) places and weighs the candidates by their candidate-local BM25
  order, the order its weights were fitted with; the attention itself still sees the documents in
  one order, which is why listwise methods keep a residual order sensitivity (BENCHMARKS.md §2).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragattn.errors import ConfigError
from ragattn.first_stage import rank_prior
from ragattn.lexical import sigmoid
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores
from ragattn.rerank.features import (
    bm25_local,
    dense_local,
    fusion_features,
    head_masses,
    local_bm25_order,
)
from ragattn.rerank.icr import AttentionMemo, WindowedAttention
from ragattn.rerank.profiles import RerankProfile
from ragattn.types import Document

ORDER_FREE_KEY = "lexical-order-free"
"""The profile's fusion of BM25 and MiniLM without a rank feature."""


class FusedScorer:
    """Logistic fusion of QRHead attention (when ``attention``), candidate-local BM25, MiniLM and
    (when given) the first stage's rank. ``proxy`` may be None only when ``attention`` is off."""

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
        elif ORDER_FREE_KEY not in profile.coef:
            raise ConfigError(
                f"the rerank profile has no {ORDER_FREE_KEY!r} fusion; rebuild it with: "
                "ragattn heads select --lexical-only"
            )

    def score(
        self,
        query: str,
        documents: Sequence[Document],
        first_stage_order: Sequence[int] | None,
    ) -> DocScores:
        att = None
        warnings: list[str] = []
        windows = 1
        bm25 = bm25_local(query, documents)
        order = first_stage_order
        key = self.key
        if self.windows is not None:
            placed = local_bm25_order(bm25, documents) if order is None else order
            masses, windows, warnings = head_masses(self.windows, query, documents, placed)
            att = masses.sum(axis=1)
            order = placed
        elif order is None:
            key = ORDER_FREE_KEY
        x = fusion_features(
            att,
            bm25,
            dense_local(query, documents),
            None if order is None else rank_prior(order),
        )
        raw = x @ self.profile.coef[key] + self.profile.intercept[key]
        return DocScores(raw=raw, relevance=sigmoid(raw), windows=windows, warnings=tuple(warnings))
