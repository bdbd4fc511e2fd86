"""The rerank methods: one :class:`~ragattn.methods.MethodSpec` per name.

A factory receives :class:`ScorerInputs` and builds the method's scorer. Methods that read
attention get the loaded proxy and the shared :class:`~ragattn.rerank.icr.AttentionMemo` (so an
evaluation of several methods on the same lists costs one forward pass); ``minilm`` and
``fused-no-attention`` need no proxy, and the :class:`~ragattn.rerank.Reranker` loads none for them;
``minilm-hyde`` reads no attention and runs the proxy only to write one answer per query
(``generates``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ragattn.assets import default_models_dir, proxy_slug
from ragattn.attention import HeadSet
from ragattn.document_probe import load_document_probe
from ragattn.errors import ConfigError
from ragattn.methods import MethodSpec, MethodTable
from ragattn.proxy import Proxy
from ragattn.rerank.base import Scorer
from ragattn.rerank.dense import DenseScorer
from ragattn.rerank.fusion import FusedScorer
from ragattn.rerank.hyde import HYDE_WEIGHT, HydeScorer
from ragattn.rerank.icr import AttentionMemo, IcrScorer
from ragattn.rerank.lexical import SCALE as BM25_SCALE
from ragattn.rerank.lexical import Bm25Scorer
from ragattn.rerank.probe import SCALE as PROBE_SCALE
from ragattn.rerank.probe import AttentionProbeScorer
from ragattn.rerank.profiles import load_rerank_profile, load_retrieval_heads


@dataclass(frozen=True, slots=True, kw_only=True)
class ScorerInputs:
    """What a factory may use: the proxy (None when the method does not need one), the proxy's name
    (to find its learned assets) and the memo shared between methods (None: no sharing)."""

    proxy: Proxy | None
    proxy_name: str
    memo: AttentionMemo | None

    def loaded_proxy(self, method: str) -> Proxy:
        if self.proxy is None:
            raise ConfigError(f"rerank method {method!r} runs the proxy but none was loaded")
        return self.proxy


ScorerFactory = Callable[[ScorerInputs], Scorer]
RerankSpec = MethodSpec[ScorerFactory]

HeadChoice = Literal["all", "middle", "qrhead", "retrieval"]


def _heads(choice: HeadChoice, proxy: Proxy) -> HeadSet | str:
    if choice == "qrhead":
        return load_rerank_profile(proxy).heads
    if choice == "retrieval":
        return load_retrieval_heads(proxy)
    return choice


ICR_SCALE = (
    "raw_score: calibrated attention mass (probability units summed over the heads and the "
    "document's tokens) times the window's document count; relevance_score = "
    "sigmoid(raw / (0.01 x heads))"
)
FUSION_SCALE = "raw_score: the fusion's log-odds of relevance; relevance_score = sigmoid(raw)"
MINILM_SCALE = "raw_score: MiniLM cosine in [-1, 1]; relevance_score = (raw + 1) / 2"
HYDE_SCALE = (
    f"raw_score: (MiniLM cosine with the query + {HYDE_WEIGHT} x cosine with the proxy's "
    f"one-sentence answer) / {1 + HYDE_WEIGHT}, in [-1, 1]; relevance_score = (raw + 1) / 2"
)


def icr_spec(
    name: str,
    description: str,
    *,
    heads: HeadChoice = "all",
    calibrate: bool = True,
    reattn: bool = False,
    query_first: bool = False,
    docs_per_window: int | None = None,
    orders: int = 1,
) -> RerankSpec:
    """An ICR method; ``reattn`` adds ReAttn's IDF weights and entropy term (lambda 0.5).

    The lab registry (:mod:`ragattn.lab.registry`) builds its prompt-design variants with it.
    """

    def build(inputs: ScorerInputs) -> Scorer:
        proxy = inputs.loaded_proxy(name)
        return IcrScorer(
            proxy,
            heads=_heads(heads, proxy),
            calibrate=calibrate,
            idf=reattn,
            entropy_lambda=0.5 if reattn else 0.0,
            name=name,
            memo=inputs.memo,
            query_first=query_first,
            docs_per_window=docs_per_window,
            orders=orders,
        )

    return MethodSpec(
        name=name,
        factory=build,
        description=description,
        needs_profile=heads in ("qrhead", "retrieval"),
        score_scale=ICR_SCALE,
        order_free=docs_per_window == 1,
    )


def _fused(inputs: ScorerInputs) -> Scorer:
    proxy = inputs.loaded_proxy("fused")
    return FusedScorer(
        proxy, load_rerank_profile(proxy), attention=True, name="fused", memo=inputs.memo
    )


def _fused_no_attention(inputs: ScorerInputs) -> Scorer:
    profile = load_rerank_profile(inputs.proxy_name)
    return FusedScorer(None, profile, attention=False, name="fused-no-attention")


def _minilm(inputs: ScorerInputs) -> Scorer:
    return DenseScorer()


def _bm25(inputs: ScorerInputs) -> Scorer:
    return Bm25Scorer()


def _attention_probe(inputs: ScorerInputs) -> Scorer:
    proxy = inputs.loaded_proxy("attention-probe")
    return AttentionProbeScorer(proxy, load_document_probe(default_models_dir(), proxy_slug(proxy)))


def _minilm_hyde(inputs: ScorerInputs) -> Scorer:
    return HydeScorer(inputs.loaded_proxy("minilm-hyde"))


METHODS: MethodTable[ScorerFactory] = MethodTable(
    "rerank",
    [
        icr_spec("icr", "ICR over all full-attention heads, N/A-calibrated"),
        icr_spec("qrhead", "ICR over the QRHead heads of the rerank profile", heads="qrhead"),
        icr_spec(
            "qrhead-reattn",
            "QRHead heads with ReAttn re-weighting",
            heads="qrhead",
            reattn=True,
        ),
        MethodSpec(
            name="fused",
            factory=_fused,
            description="learned fusion of QRHead attention, BM25, MiniLM and a rank prior",
            needs_embedder=True,
            needs_profile=True,
            score_scale=FUSION_SCALE,
        ),
        MethodSpec(
            name="attention-probe",
            factory=_attention_probe,
            description="a probe over every head's attention to each document, on top of MiniLM",
            needs_probe=True,
            needs_embedder=True,
            score_scale=PROBE_SCALE,
            order_free=True,
        ),
        MethodSpec(
            name="minilm",
            factory=_minilm,
            description="MiniLM cosine of query and document",
            reads_attention=False,
            needs_embedder=True,
            score_scale=MINILM_SCALE,
            order_free=True,
        ),
        MethodSpec(
            name="bm25",
            factory=_bm25,
            description="BM25 over the candidates, words or character bigrams (every language)",
            reads_attention=False,
            score_scale=BM25_SCALE,
            order_free=True,
        ),
        MethodSpec(
            name="minilm-hyde",
            factory=_minilm_hyde,
            description="MiniLM cosine with the query and with the proxy's one-sentence answer",
            reads_attention=False,
            generates=True,
            needs_embedder=True,
            score_scale=HYDE_SCALE,
            order_free=True,
        ),
        MethodSpec(
            name="fused-no-attention",
            factory=_fused_no_attention,
            description="learned fusion of BM25, MiniLM (+ first-stage rank when given)",
            reads_attention=False,
            needs_embedder=True,
            needs_profile=True,
            score_scale=FUSION_SCALE,
            order_free=True,
        ),
    ],
)
"""Rerank methods by name (iterated in name order)."""

DEFAULT_METHOD = "minilm"
"""Chosen by the rule declared in the proxy's model card (``models/<proxy>/README.md``) and
BENCHMARKS.md §2: the best mean nDCG@10 over DL19 top-100 and SciFact top-100 (candidates
shuffled, order-free) among methods that rerank 20 passages of 128 tokens in at most 1.0 s on 2
CPU cores (generation counts), a tie going to the cheaper method; the obvious cases are a floor
measured on cases that were not used to choose. No method that reads attention or generates meets
that cost on 2 CPU cores today; the measured scores of every candidate are in BENCHMARKS.md §2.
``method="attention-probe"`` reads the proxy's attention on top of MiniLM; with a real first stage,
``first_stage_order=`` and ``method="fused-no-attention"`` use the first stage's ranking."""

MULTILINGUAL_METHOD = "bm25"
"""What ranks a call not in English by default (``Reranker(multilingual="auto")``), chosen by the
rule declared before measuring in docs/research/languages.md, "The standalone reranker outside
English"."""


__all__ = [
    "DEFAULT_METHOD",
    "MULTILINGUAL_METHOD",
    "METHODS",
    "HeadChoice",
    "RerankSpec",
    "ScorerFactory",
    "ScorerInputs",
    "icr_spec",
]
