"""The sentence scorers behind the compress methods: one class per way of scoring.

Each takes the query, the documents and their sentence units and returns one keep score in [0, 1]
per unit and the number of proxy chunks read (0 when no proxy forward ran).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragattn.compress.features import FeatureSet, SentenceFeatures, Unit, sentence_features
from ragattn.compress.focal import focal_scores
from ragattn.compress.probe import Probe
from ragattn.proxy import Proxy
from ragattn.types import Document

if TYPE_CHECKING:
    from ragattn.blocks import BlockReader


class UnitScorer(Protocol):
    """Keep scores for sentence units."""

    def score(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        """Keep scores in [0, 1] aligned with ``units``, and the number of proxy chunks read."""
        ...


class ProbeScorer:
    """A trained probe (:class:`~ragattn.compress.probe.Probe`) over the feature blocks of
    ``features``; ``proxy`` may be None when the blocks need no attention.

    The attention rows and the number of layers read come from the probe's file (its ``rows`` and
    ``layers``), so a layer-restricted probe runs the forward only as deep as it reads.
    """

    def __init__(
        self,
        proxy: Proxy | None,
        probe: Probe,
        features: FeatureSet,
        *,
        max_chunk_tokens: int,
        blocks: BlockReader | None = None,
    ) -> None:
        self.proxy = proxy
        self.blocks = blocks if features.attention else None
        self.probe = probe
        layers = probe.config.get("layers")
        self.features = replace(
            features,
            rows=probe.config.get("rows", features.rows),
            layers=int(layers) if layers is not None else features.layers,
        )
        self.max_chunk_tokens = max_chunk_tokens

    def score(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        scores, feats = self.score_with_features(query, documents, units)
        return scores, feats.chunks

    def score_with_features(
        self,
        query: str,
        documents: Sequence[Document],
        units: Sequence[Unit],
        *,
        dense: np.ndarray | None = None,
    ) -> tuple[np.ndarray, SentenceFeatures]:
        """Keep scores and the features they were computed from (for a document probe that reads
        the same forward); ``dense``: the units' MiniLM cosines when the caller has them (see
        :func:`~ragattn.compress.features.lexical_block`)."""
        spec = self.features
        feats = sentence_features(
            self.proxy,
            query,
            documents,
            units,
            attention=spec.attention,
            lexical=spec.lexical,
            dense=spec.dense,
            rows=spec.rows,
            layers=spec.layers,
            max_chunk_tokens=self.max_chunk_tokens,
            reader=self.blocks,
            dense_cosines=dense,
        )
        return self.probe.predict(feats.names, feats.matrix, feats.config), feats


class FocalScorer:
    """AttentionRAG's answer-prefix focal token (:func:`~ragattn.compress.focal.focal_scores`)."""

    def __init__(self, proxy: Proxy, *, max_chunk_tokens: int) -> None:
        self.proxy = proxy
        self.max_chunk_tokens = max_chunk_tokens

    def score(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        return focal_scores(
            self.proxy, query, documents, units, max_chunk_tokens=self.max_chunk_tokens
        )


__all__ = ["FocalScorer", "ProbeScorer", "UnitScorer"]
