"""The lab's methods: prompt-design variants and ablations that ``ragattn eval`` and the studies
reach by name, and that the runtime does not ship.

They were measured and never won nor became a default (BENCHMARKS.md §2 and §3 carry their rows),
so the runtime registries (:data:`ragattn.rerank.METHODS`, :data:`ragattn.compress.METHODS`) list
only what a user should pick, and the service never offers these. The lab tables below hold the
runtime methods *and* these, under the same names, so an evaluation command written against the
old single registry still runs. Pass a spec to a facade to build one::

    Reranker(proxy, method=rerank_spec("icr-pointwise"))
    Compressor(proxy, method=compress_spec("attention-raw"))

The runtime never imports this module (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragattn.compress.features import Unit, attention_block
from ragattn.compress.registry import METHODS as RUNTIME_COMPRESS
from ragattn.compress.registry import CompressSpec, UnitScorerFactory
from ragattn.compress.registry import ScorerInputs as CompressInputs
from ragattn.compress.scorers import UnitScorer
from ragattn.methods import MethodSpec, MethodTable
from ragattn.proxy import Proxy
from ragattn.rerank.registry import METHODS as RUNTIME_RERANK
from ragattn.rerank.registry import RerankSpec, ScorerFactory, icr_spec
from ragattn.types import Document

RERANK_VARIANTS: MethodTable[ScorerFactory] = MethodTable(
    "rerank",
    [
        icr_spec("icr-uncalibrated", "ICR over all heads without the N/A twin", calibrate=False),
        icr_spec("icr-middle", "ICR over the middle layers' heads", heads="middle"),
        icr_spec(
            "icr-middle-reattn",
            "ICR over the middle layers with ReAttn re-weighting",
            heads="middle",
            reattn=True,
        ),
        icr_spec("icr-two-orders", "ICR averaged over two document orders", orders=2),
        icr_spec("icr-query-first", "ICR with the query also stated first", query_first=True),
        icr_spec("icr-pointwise", "ICR with one document per forward", docs_per_window=1),
        icr_spec("icr-retrieval", "ICR over Wu et al. retrieval heads", heads="retrieval"),
        icr_spec(
            "icr-retrieval-reattn",
            "retrieval heads with ReAttn re-weighting",
            heads="retrieval",
            reattn=True,
        ),
    ],
)
"""Rerank variants and ablations that are not in the runtime registry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RawAttentionScorer:
    """Untrained baseline: ``sigmoid`` of the mean over all heads of the last token's log context
    share (the Sentinel attention features without a probe); ``max_chunk_tokens`` proxy tokens
    per forward at most."""

    proxy: Proxy
    max_chunk_tokens: int

    def score(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        block, _, chunks = attention_block(
            self.proxy, query, documents, units, max_chunk_tokens=self.max_chunk_tokens
        )
        mean = block.mean(axis=1)
        return 1.0 / (1.0 + np.exp(-mean)), chunks


def _attention_raw(inputs: CompressInputs) -> UnitScorer:
    return RawAttentionScorer(
        proxy=inputs.loaded_proxy("attention-raw"), max_chunk_tokens=inputs.max_chunk_tokens
    )


COMPRESS_VARIANTS: MethodTable[UnitScorerFactory] = MethodTable(
    "compress",
    [
        MethodSpec(
            name="attention-raw",
            factory=_attention_raw,
            description="mean last-token context share over all heads (untrained)",
        ),
    ],
)
"""Compress baselines that are not in the runtime registry."""

RERANK_METHODS: MethodTable[ScorerFactory] = MethodTable(
    "rerank", [*RUNTIME_RERANK.values(), *RERANK_VARIANTS.values()]
)
"""Every rerank method the lab reaches by name: the runtime's and the variants."""

COMPRESS_METHODS: MethodTable[UnitScorerFactory] = MethodTable(
    "compress", [*RUNTIME_COMPRESS.values(), *COMPRESS_VARIANTS.values()]
)
"""Every compress method the lab reaches by name: the runtime's and the baselines."""


def rerank_spec(name: str) -> RerankSpec:
    """The rerank method ``name``, runtime or lab.

    Raises:
        InvalidInputError: an unknown name (the message lists runtime and lab names).
    """
    return RERANK_METHODS.spec(name)


def compress_spec(name: str) -> CompressSpec:
    """The compress method ``name``, runtime or lab.

    Raises:
        InvalidInputError: an unknown name (the message lists runtime and lab names).
    """
    return COMPRESS_METHODS.spec(name)


__all__ = [
    "COMPRESS_METHODS",
    "COMPRESS_VARIANTS",
    "RERANK_METHODS",
    "RERANK_VARIANTS",
    "RawAttentionScorer",
    "compress_spec",
    "rerank_spec",
]
