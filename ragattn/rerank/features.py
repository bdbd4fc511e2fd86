"""Per-candidate features of the fused reranker, computed within one query's candidate list.

Every feature is candidate-local (no corpus statistics), so a list scores the same wherever it came
from: BM25 over the candidates themselves, MiniLM cosine, the calibrated attention mass of a head
set, and the first stage's rank prior. :func:`fusion_features` z-scores each within the list, so
fusion weights learned on lists of one size transfer to lists of another.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragattn.embed import document_cosines
from ragattn.lexical import bm25_scores
from ragattn.rerank.icr import WindowedAttention
from ragattn.types import Document


def bm25_local(query: str, documents: Sequence[Document]) -> np.ndarray:
    """BM25 (rank-bm25 Okapi) of each candidate's ``title + text`` over the candidate set itself,
    divided by the list's maximum: in [0, 1]."""
    return bm25_scores(query, [f"{d.title or ''} {d.text}" for d in documents])


def dense_local(query: str, documents: Sequence[Document]) -> np.ndarray:
    """MiniLM cosine (in [-1, 1]) of the query and each candidate's ``title + text``."""
    return document_cosines(query, documents)


def head_masses(
    windows: WindowedAttention, query: str, documents: Sequence[Document], order: Sequence[int]
) -> tuple[np.ndarray, int, list[str]]:
    """``[n_docs, n_heads]`` calibrated attention mass (sum over each document's tokens) per head,
    scaled by the window's document count as in :class:`~ragattn.rerank.icr.IcrScorer`; also the
    number of windows and the warnings. ``order`` is the first stage's, best first."""
    out = np.zeros((len(documents), len(windows.heads)))
    wins, warnings = windows.run(query, documents, list(reversed(order)))
    for win in wins:
        delta = win.delta.cpu().numpy()
        for i in win.docs:
            span = win.prompt.document(i).tokens
            out[i] = delta[:, span.as_slice()].sum(axis=1) * len(win.docs)
    return out, len(wins), warnings


def zscore(x: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` within the list; all 0 when the list is constant.

    The mean and the deviation are summed over the sorted values, so they do not depend on the
    order of the list: the same documents in another input order get bit-identical features.
    """
    ordered = np.sort(x)
    mean = ordered.mean()
    std = float(np.sqrt(np.sort((ordered - mean) ** 2).mean()))
    return (x - mean) / std if std > 1e-12 else np.zeros_like(x)


def local_bm25_order(bm25: np.ndarray, documents: Sequence[Document]) -> list[int]:
    """The candidates by descending candidate-local BM25, ties by text then index: the order the
    fusion weights were fitted with (``ragattn heads select`` ranks its training lists so), and
    one that depends on the documents only, not on where the caller put them."""
    return sorted(range(len(documents)), key=lambda i: (-bm25[i], documents[i].text, i))


def fusion_features(
    attention: np.ndarray | None,
    bm25: np.ndarray,
    dense: np.ndarray,
    prior: np.ndarray | None,
) -> np.ndarray:
    """``[n_docs, 2 to 4]``: z-scored (attention,) BM25, MiniLM (and rank prior), in the order the
    stored fusion weights expect. ``prior`` None is the order-free fusion: no rank feature."""
    cols = [zscore(bm25), zscore(dense)]
    if prior is not None:
        cols.append(zscore(prior))
    if attention is not None:
        cols.insert(0, zscore(attention))
    return np.stack(cols, axis=1)


__all__ = [
    "bm25_local",
    "dense_local",
    "fusion_features",
    "head_masses",
    "local_bm25_order",
    "zscore",
]
