"""The end-to-end RAG pipeline: retrieve -> one read (rank and prune) -> cache lookup -> generate.

::

    pipeline = RAGPipeline(Index.load("my-index"), reranker=Reranker(proxy),
                           compressor=Compressor(proxy), generator=LocalGenerator(proxy),
                           cache=MemoryCache())
    result = pipeline.ask("who designed the Eiffel Tower?")
    result.answer.text, result.sources[0].relevance_score, result.ratio, result.timings.total

The default flow is **one read** (``flow="one_read"``): the compressor's proxy reads every
retrieved candidate with the question once, and from that forward come both the ranking of the
passages and the sentences kept under the budget (:meth:`Compressor.rerank_and_compress
<ragattn.compress.Compressor.rerank_and_compress>`), so evidence in a passage a reranker would
have put below ``top_n`` still reaches the generator. ``flow="two_pass"`` is the older flow: the
reranker orders the hits, the best ``top_n`` are kept, and the compressor prunes those.

Every stage but retrieval and generation can be switched off: ``reranker=None`` keeps the
first-stage order, ``compressor=None`` passes whole passages, ``cache=None`` always generates.
Per call, :class:`PipelineOptions` also switch rerank and compression off (without compression,
the one-read flow falls back to the two-pass one: there is nothing to read once for).

The cache sits in front of the generator only: its key is a sha256 over the generator's
identity, the options, the index hash, the question and the exact, ordered context, so a hit is
the answer the generator gave for that very prompt. Retrieval, reranking and compression always
run (they are cheap next to a generator and their results are reported).

The package, one concept a module: :mod:`~ragattn.pipeline.options` (the per-call options and the
context orders), :mod:`~ragattn.pipeline.results` (what each stage hands on),
:mod:`~ragattn.pipeline.timing` (seconds per stage), :mod:`~ragattn.pipeline.index` (the index it
searches), :mod:`~ragattn.pipeline.flows` (one read and two passes) and
:mod:`~ragattn.pipeline.rag` (:class:`RAGPipeline`, which wires them together).
"""

from __future__ import annotations

from ragattn.pipeline.index import (
    NO_INDEX_HELP,
    SearchIndex,
    demo_corpus_dir,
    load_index,
    no_index_help,
)
from ragattn.pipeline.options import (
    DEFAULT_FLOW,
    DEFAULT_ORDER,
    FLOW_DEFAULTS,
    FLOWS,
    ORDERS,
    ContextOrder,
    Flow,
    Mode,
    PipelineOptions,
    order_context,
)
from ragattn.pipeline.rag import RAGPipeline, RunBlocking
from ragattn.pipeline.results import (
    Candidate,
    PipelineResult,
    PreparedContext,
    Question,
    Retrieval,
    Source,
    hit_document,
)
from ragattn.pipeline.timing import StageTimings

__all__ = [
    "DEFAULT_FLOW",
    "DEFAULT_ORDER",
    "FLOWS",
    "FLOW_DEFAULTS",
    "NO_INDEX_HELP",
    "ORDERS",
    "Candidate",
    "ContextOrder",
    "Flow",
    "Mode",
    "PipelineOptions",
    "PipelineResult",
    "PreparedContext",
    "Question",
    "RAGPipeline",
    "Retrieval",
    "RunBlocking",
    "SearchIndex",
    "Source",
    "StageTimings",
    "demo_corpus_dir",
    "hit_document",
    "load_index",
    "no_index_help",
    "order_context",
]
