"""The scores one read of a call's context gives the :class:`~ragattn.compress.Compressor`.

A read (:mod:`ragattn.compress.read`, stage by stage) is the cascade's cut
(:mod:`ragattn.compress.cascade`: :func:`reduced` is the context it lets attention read), then one
proxy forward over what it kept: keep scores per sentence (:class:`KeepScores`) and, for the one
read that also ranks, the documents' scores from the same forward (:class:`Ranking`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ragattn.compress.features import Unit
from ragattn.types import Document

RankingSource = Literal["document-probe", "max-sentence"]
"""How a read ranks documents: the proxy's document probe (its log-odds, from the read's
features) or each document's best sentence keep score (in [0, 1])."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranking:
    """Document scores of one read, by input position: ``raw`` (the probe's log-odds, or the best
    sentence's keep score in [0, 1]), ``relevance`` in [0, 1], and how they were made."""

    raw: np.ndarray
    relevance: np.ndarray
    how: RankingSource


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepScores:
    """The sentences' keep scores of one read: in [0, 1] per sentence (0 where the cascade
    dropped it), proxy chunks read and warning notes (the ranking of the same read is the
    ``ranking`` stage's :class:`Ranking`)."""

    scores: np.ndarray
    chunks: int
    notes: tuple[str, ...]


def best_sentence_ranking(
    n_docs: int, units: Sequence[Unit], scores: np.ndarray | Sequence[float]
) -> Ranking:
    """Each document scored by its best sentence's keep score (0 for one without sentences)."""
    best = np.zeros(n_docs)
    for unit, score in zip(units, scores, strict=True):
        best[unit.doc] = max(best[unit.doc], float(score))
    return Ranking(raw=best, relevance=best, how="max-sentence")


def reduced(
    docs: Sequence[Document], units: Sequence[Unit], read: Sequence[int] | np.ndarray
) -> tuple[list[Document], list[Unit]]:
    """The context the cascade lets attention read: each document with only the ``read`` units,
    joined by one space (a document with none is left out), and those units' spans in it, in the
    order of ``read``."""
    by_doc: dict[int, list[int]] = {}
    for i in read:
        by_doc.setdefault(units[i].doc, []).append(i)
    out_docs: list[Document] = []
    spans: dict[int, Unit] = {}
    for d in sorted(by_doc):
        parts: list[str] = []
        cursor = 0
        for i in by_doc[d]:
            text = docs[d].text[units[i].start : units[i].end]
            if parts:
                cursor += 1
            spans[i] = Unit(len(out_docs), cursor, cursor + len(text))
            parts.append(text)
            cursor += len(text)
        out_docs.append(replace(docs[d], text=" ".join(parts)))
    return out_docs, [spans[i] for i in read]


__all__ = ["KeepScores", "Ranking", "RankingSource", "best_sentence_ranking", "reduced"]
