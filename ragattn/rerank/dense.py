"""The bi-encoder scorer: MiniLM cosine between the query and each candidate, no proxy forward.

It is the strongest single signal measured at 135M on DL19 (BENCHMARKS.md §2) and the reference the
attention methods have to beat; it is also what ``fused-no-attention`` builds on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragattn.rerank.base import DocScores
from ragattn.rerank.features import dense_local
from ragattn.types import Document


class DenseScorer:
    """Raw score: cosine similarity in [-1, 1] of the packaged MiniLM's unit vectors of the query
    and of ``title + " " + text``; ``relevance_score = (raw + 1) / 2`` in [0, 1]. The first-stage
    order is not used, so the ranking does not depend on the input order."""

    def __init__(self, name: str = "minilm") -> None:
        self.name = name

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores:
        raw = np.asarray(dense_local(query, documents), dtype=np.float64)
        return DocScores(raw=raw, relevance=np.clip((raw + 1.0) / 2.0, 0.0, 1.0))
