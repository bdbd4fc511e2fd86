"""Per-sentence features from one proxy forward pass (Sentinel) plus cheap lexical/dense signals.

The attention block (every head's share of each sentence, from the last row and/or the question
span, in chunks) is :mod:`ragattn.sentence_attention`, shared with the document probe of reranking;
its names are re-exported here. This module adds the lexical block (BM25, MiniLM, position,
length) and assembles the blocks a sentence probe reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ragattn.embed import dense_scores
from ragattn.errors import ConfigError
from ragattn.lexical import bm25_scores, words
from ragattn.proxy import Proxy
from ragattn.sentence_attention import (
    EPS,
    Rows,
    Unit,
    attention_block,
    attention_config,
    chunk_context,
    plan_chunks,
)
from ragattn.types import Document

if TYPE_CHECKING:
    from ragattn.blocks import BlockReader

__all__ = [
    "EPS",
    "FeatureSet",
    "Rows",
    "SentenceFeatures",
    "Unit",
    "attention_block",
    "attention_config",
    "chunk_context",
    "lexical_block",
    "plan_chunks",
    "sentence_features",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSet:
    """Which feature blocks a sentence probe reads: Sentinel attention (``rows`` says which
    attention rows), the lexical block (BM25, position, length) and its MiniLM columns."""

    attention: bool
    lexical: bool
    dense: bool
    rows: Rows = "last"
    layers: int | None = None  # leading layers the attention block reads (None: all)


@dataclass(frozen=True, slots=True, kw_only=True)
class SentenceFeatures:
    """A ``[len(units), len(names)]`` float64 matrix, one row per unit, columns named.

    ``config`` says how the attention block was computed (``rows``, ``layers`` read, weights'
    ``dtype``; empty without attention): a probe refuses features computed another way.
    """

    units: tuple[Unit, ...]
    names: tuple[str, ...]
    matrix: np.ndarray
    chunks: int
    config: Mapping[str, Any] = field(default_factory=dict)


def lexical_block(
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    *,
    dense: bool,
    cosines: np.ndarray | None = None,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Cheap features: BM25 share, MiniLM cosine (and its rank share), position and length.

    ``cosines`` (one per unit, in [-1, 1]) are the MiniLM column when the caller has them
    (e.g. pooled from a document pass); otherwise each unit is encoded alone."""
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    cols = [bm25_scores(query, texts)]
    names = ["bm25"]
    if dense:
        cos = (
            dense_scores(query, texts) if cosines is None else np.asarray(cosines, dtype=np.float64)
        )
        if len(cos) != len(units):
            raise ValueError("lexical_block needs one cosine per unit")
        cols += [cos, cos - cos.max()]
        names += ["dense", "dense_gap"]
    per_doc: dict[int, list[int]] = {}
    for i, u in enumerate(units):
        per_doc.setdefault(u.doc, []).append(i)
    position = np.zeros(len(units))
    first = np.zeros(len(units))
    for members in per_doc.values():
        for rank, i in enumerate(members):
            position[i] = rank / max(1, len(members) - 1)
            first[i] = 1.0 if rank == 0 else 0.0
    length = np.array([math.log(1 + len(words(t))) for t in texts])
    cols += [position, first, length]
    names += ["position", "first", "log_words"]
    return np.stack(cols, axis=1), tuple(names)


def sentence_features(
    proxy: Proxy | None,
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    *,
    attention: bool = True,
    lexical: bool = True,
    dense: bool = True,
    rows: Rows = "last",
    layers: int | None = None,
    max_chunk_tokens: int = 2048,
    reader: BlockReader | None = None,
    dense_cosines: np.ndarray | None = None,
) -> SentenceFeatures:
    """All requested feature blocks for ``units``, concatenated in a fixed order.

    With ``reader``, the attention block reads the passages as cached document blocks
    (:class:`ragattn.blocks.BlockReader`) instead of one full prompt; ``dense_cosines`` are the
    units' MiniLM cosines when the caller has them (:func:`lexical_block`).
    """
    blocks: list[np.ndarray] = []
    names: list[str] = []
    chunks = 0
    config: dict[str, Any] = {}
    if attention:
        if proxy is None:
            raise ConfigError("attention features need a loaded proxy")
        if reader is not None:
            block, block_names, chunks = reader.attention_block(
                query, documents, units, rows=rows, layers=layers, max_chunk_tokens=max_chunk_tokens
            )
        else:
            block, block_names, chunks = attention_block(
                proxy,
                query,
                documents,
                units,
                rows=rows,
                layers=layers,
                max_chunk_tokens=max_chunk_tokens,
            )
        blocks.append(block)
        names += block_names
        config = attention_config(proxy, rows=rows, layers=layers)
    if lexical:
        block, block_names = lexical_block(
            query, documents, units, dense=dense, cosines=dense_cosines
        )
        blocks.append(block)
        names += block_names
    matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(units), 0))
    return SentenceFeatures(
        units=tuple(units), names=tuple(names), matrix=matrix, chunks=chunks, config=config
    )
