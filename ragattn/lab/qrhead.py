"""The QRHead recipe behind ``ragattn heads select``: select query-focused heads and fit the rank
fusion on training questions, and describe the result as the rerank profile's JSON payload.

Steps (:mod:`ragattn.lab.rerank_training`): load the training questions, capture every
full-attention head's calibrated mass per paragraph, keep the ``top_k`` heads by mean nDCG@10,
then fit the logistic fusion with and without the attention feature. The payload also records the
training nDCG@10 of each single signal, the question counts and the command, for the model card.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.attention import HeadSet
from ragattn.lab import rerank_training as training
from ragattn.lab.evaluation.metrics import list_ndcg_at_10
from ragattn.proxy import Proxy

FUSION_FEATURES = {
    "attention": ["qrhead", "bm25", "minilm", "rank_prior"],
    "lexical": ["bm25", "minilm", "rank_prior"],
    "lexical-order-free": ["bm25", "minilm"],
}
"""The features of each fusion in the profile, in the order of its weights."""


def _mean_ndcg(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray]) -> float:
    return float(np.mean(list_ndcg_at_10(scores, labels)))


def _fusions(
    table: training.RerankTable, index: Sequence[int], *, attention: bool
) -> dict[str, dict[str, Any]]:
    keys = [("lexical", False, True), ("lexical-order-free", False, False)]
    if attention:
        keys.insert(0, ("attention", True, True))
    out = {}
    for key, att, prior in keys:
        coef, intercept = training.fit_fusion(table, index, attention=att, prior=prior)
        out[key] = {"coef": coef.tolist(), "intercept": intercept}
    return out


def refit_lexical_fusions(
    payload: dict[str, Any], data_dir: Path, *, per_source: int, scifact: bool = False
) -> dict[str, Any]:
    """Refit only the fusions without attention (``lexical`` and ``lexical-order-free``) of an
    existing profile payload, from BM25 and MiniLM features of the training questions: no proxy
    forward, minutes instead of the full recipe. Heads and the attention fusion are kept."""
    examples = training.load_rerank_training(data_dir, per_source, scifact=scifact)
    table = training.extract(None, examples)
    fusion = {**payload["fusion"], **_fusions(table, [], attention=False)}
    flag = " --scifact" if scifact else ""
    return {
        **payload,
        "fusion": fusion,
        "fusion_features": FUSION_FEATURES,
        "lexical_training_questions": dict(Counter(ex.source for ex in examples)),
        "lexical_command": f"ragattn heads select --lexical-only --per-source {per_source}{flag}",
        "lexical_date": dt.date.today().isoformat(),
    }


def fit_rerank_profile(
    proxy: Proxy, data_dir: Path, *, per_source: int, top_k: int, scifact: bool = False
) -> dict[str, Any]:
    """Run the recipe on ``proxy`` over the training sources under ``data_dir``.

    Args:
        proxy: the loaded proxy whose heads are selected.
        data_dir: the shared data folder (training splits only are read).
        per_source: training questions per source.
        top_k: heads kept in the profile.
        scifact: add SciFact train claims (BM25 top-20 over the corpus) as a fourth source.

    Returns:
        The rerank-profile payload (heads, fusion weights, training nDCG@10, counts, command, date),
        ready for :func:`ragattn.lab.profile_writers.write_rerank_profile`.
    """
    examples = training.load_rerank_training(data_dir, per_source, scifact=scifact)
    table = training.extract(proxy, examples)
    heads = HeadSet.from_layers(proxy.full_attention_layers(), proxy.num_heads)
    chosen, scores = training.select_heads(table, heads, top_k)
    index = [heads.pairs.index(p) for p in chosen]
    fusion = _fusions(table, index, attention=True)
    train_ndcg = {
        "bm25": _mean_ndcg(table.bm25, table.labels),
        "minilm": _mean_ndcg(table.dense, table.labels),
        "icr_all_heads": _mean_ndcg([m.sum(axis=1) for m in table.masses], table.labels),
        "qrhead": _mean_ndcg([m[:, index].sum(axis=1) for m in table.masses], table.labels),
    }
    return {
        "proxy": proxy.name,
        "heads": [list(p) for p in chosen],
        "head_train_ndcg": scores,
        "fusion": fusion,
        "fusion_features": FUSION_FEATURES,
        "train_ndcg_at_10": train_ndcg,
        "training_questions": dict(Counter(ex.source for ex in examples)),
        "command": f"ragattn heads select --per-source {per_source} --top-k {top_k}",
        "date": dt.date.today().isoformat(),
    }


__all__ = ["FUSION_FEATURES", "fit_rerank_profile", "refit_lexical_fusions"]
