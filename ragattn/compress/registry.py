"""The compress methods: one :class:`~ragattn.methods.MethodSpec` per name.

- ``sentinel`` (default): the trained probe over the Sentinel attention of the query-span rows
  (every head of every layer, raw and z-scored per question).
- ``fused``: the same attention features + BM25 + MiniLM + position/length.
- ``lexical``: the same probe recipe without any attention feature (no proxy forward).
- ``focal``: AttentionRAG's answer-prefix focal token, untrained.

The untrained ``attention-raw`` baseline is a lab method (:mod:`ragattn.lab.registry`).

Probe weights load from ``models/<proxy>/<method>.npz`` (``ragattn probe train`` writes them;
:mod:`ragattn.compress.model_files` finds and loads every model file).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ragattn.blocks import BlockReader
from ragattn.compress.features import FeatureSet
from ragattn.compress.probe import Probe
from ragattn.compress.scorers import FocalScorer, ProbeScorer, UnitScorer
from ragattn.errors import ConfigError
from ragattn.methods import MethodSpec, MethodTable
from ragattn.proxy import Proxy


@dataclass(frozen=True, slots=True, kw_only=True)
class ScorerInputs:
    """What a factory may use: the proxy (None unless the method needs it), the trained probe (None
    unless the method needs one) and the chunk size in proxy tokens."""

    proxy: Proxy | None
    probe: Probe | None
    max_chunk_tokens: int
    blocks: BlockReader | None = None  # read passages as cached blocks (ragattn.blocks)

    def loaded_proxy(self, method: str) -> Proxy:
        if self.proxy is None:
            raise ConfigError(f"compress method {method!r} runs the proxy but none was loaded")
        return self.proxy

    def loaded_probe(self, method: str) -> Probe:
        if self.probe is None:
            raise ConfigError(f"compress method {method!r} needs its probe but none was loaded")
        return self.probe


UnitScorerFactory = Callable[[ScorerInputs], UnitScorer]
CompressSpec = MethodSpec[UnitScorerFactory]

PROBE_METHODS: Mapping[str, FeatureSet] = MappingProxyType(
    {
        "fused": FeatureSet(attention=True, lexical=True, dense=True),
        "sentinel": FeatureSet(attention=True, lexical=False, dense=False),
        "lexical": FeatureSet(attention=False, lexical=True, dense=True),
    }
)
"""The feature blocks of each probe method (what ``ragattn probe train`` fits, per name)."""


def _probe(name: str, description: str) -> CompressSpec:
    features = PROBE_METHODS[name]

    def build(inputs: ScorerInputs) -> UnitScorer:
        proxy = inputs.loaded_proxy(name) if features.attention else inputs.proxy
        return ProbeScorer(
            proxy,
            inputs.loaded_probe(name),
            features,
            max_chunk_tokens=inputs.max_chunk_tokens,
            blocks=inputs.blocks,
        )

    return MethodSpec(
        name=name,
        factory=build,
        description=description,
        reads_attention=features.attention,
        needs_probe=True,
        needs_embedder=features.dense,
    )


def _focal(inputs: ScorerInputs) -> UnitScorer:
    return FocalScorer(inputs.loaded_proxy("focal"), max_chunk_tokens=inputs.max_chunk_tokens)


METHODS: MethodTable[UnitScorerFactory] = MethodTable(
    "compress",
    [
        _probe("fused", "probe over Sentinel attention, BM25, MiniLM, position and length"),
        _probe("sentinel", "probe over Sentinel attention features only"),
        _probe("lexical", "probe over BM25, MiniLM, position and length (no attention)"),
        MethodSpec(
            name="focal", factory=_focal, description="AttentionRAG focal answer-prefix token"
        ),
    ],
)
"""Compress methods by name (iterated in name order)."""

DEFAULT_METHOD = "sentinel"
"""The best measured method on the mean recall of the four shared evaluation sets (BENCHMARKS.md §3;
how its probe was trained, and on what, is in the proxy's model card, ``models/<proxy>/README.md``).
It reads the proxy's attention only (every layer's query-span rows, no BM25 or MiniLM), so it
costs one proxy forward and no sentence embedding: ``method="lexical"`` is the fast option without
attention."""


__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "PROBE_METHODS",
    "CompressSpec",
    "ScorerInputs",
    "UnitScorerFactory",
]
