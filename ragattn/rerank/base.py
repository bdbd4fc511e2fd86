"""The contract every rerank scoring method implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ragattn.types import Document


@dataclass(frozen=True, slots=True, kw_only=True)
class DocScores:
    """Raw scores of one scoring call, aligned with the input documents (higher = more relevant).

    ``relevance`` is the method's fixed monotone map of ``raw`` into [0, 1]; ``windows`` is how many
    forward windows the list was split into; ``warnings`` reports splits and truncations.
    """

    raw: np.ndarray
    relevance: np.ndarray
    windows: int = 1
    warnings: tuple[str, ...] = ()


class Scorer(Protocol):
    """Scores documents for a query.

    ``first_stage_order`` lists document indices best first when the caller has a first stage
    (a retriever's ranking), and is None otherwise: input position is never a ranking signal.
    Listwise methods still read the documents in one prompt order (input order when None).
    """

    name: str

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores: ...
