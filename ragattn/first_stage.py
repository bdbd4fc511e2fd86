"""A first stage's order of the candidates: its check, and the rank prior read from it.

A caller whose candidates come from a retriever (BM25, a dense index, the pipeline's hybrid) knows
their order. Input position is never read as that order: a caller says so by passing
``first_stage_order``, the document indices best first. The rerank fusion reads the order as a
feature (:mod:`ragattn.rerank.fusion`); the one read of the compress verbs as a prior on its
documents' relevance (:mod:`ragattn.compress.selection`, ``Compressor(first_stage_prior=...)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragattn.errors import InvalidInputError


def check_first_stage_order(order: Sequence[int] | None, n_documents: int) -> list[int] | None:
    """``order`` as a list of ints, checked against ``n_documents`` (None stays None).

    Raises:
        InvalidInputError: an order that is no permutation of ``range(n_documents)``.
    """
    if order is None:
        return None
    if isinstance(order, (str, bytes)) or not all(
        isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in order
    ):
        raise InvalidInputError("first_stage_order must be a list of document indices (integers)")
    checked = [int(i) for i in order]
    if sorted(checked) != list(range(n_documents)):
        raise InvalidInputError(
            f"first_stage_order must be a permutation of the document indices 0..{n_documents - 1}"
            f" (each once); got {len(checked)} entries"
        )
    return checked


def rank_prior(order: Sequence[int]) -> np.ndarray:
    """``1 / log2(rank + 1)`` of each document in the first stage's order (rank 1 = best; the
    document at ``order[0]`` gets 1.0), indexed by document: the discount of DCG, so the first
    few ranks differ most."""
    prior = np.zeros(len(order))
    for rank, i in enumerate(order, start=1):
        prior[i] = 1.0 / math.log2(rank + 1)
    return prior


__all__ = ["check_first_stage_order", "rank_prior"]
