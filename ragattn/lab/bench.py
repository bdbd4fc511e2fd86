"""Benchmarks of the attention engine, measured as same-run ratios against the naive baseline.

The naive baseline is what the ICR reference code does without its optimisations: eager attention
with ``output_attentions=True`` over all layers (every L×H×n×n matrix materialised), two full
passes (the query and the ``N/A`` twin). The engine runs SDPA with only the query rows recomputed,
stops after the deepest selected layer, and encodes the documents once for both passes.
"""

from __future__ import annotations

import copy
import json
import statistics
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import torch

from ragattn.lab.registry import rerank_spec
from ragattn.lab.timing import runtime_info, time_once, time_runs
from ragattn.prompt import CALIBRATION_QUERY, assemble, rerank_pieces, with_query
from ragattn.proxy import Proxy
from ragattn.rerank.icr import IcrScorer
from ragattn.types import Document


def dl19_documents(
    data_dir: Path, n_docs: int, doc_tokens: int, proxy: Proxy
) -> tuple[str, list[Document]]:
    """The first DL19 query and its first ``n_docs`` BM25 candidates, each cut to ``doc_tokens``
    proxy tokens."""
    path = data_dir / "candidates_bm25_top100.jsonl"
    with path.open() as fh:
        row = json.loads(fh.readline())
    query = row["query"]
    docs = []
    for cand in row["candidates"][:n_docs]:
        enc = proxy.tokenizer(cand["text"], add_special_tokens=False, return_offsets_mapping=True)
        cut = enc["offset_mapping"][min(doc_tokens, len(enc["input_ids"])) - 1][1]
        docs.append(Document(text=cand["text"][:cut], id=str(cand["docid"])))
    return query, docs


def naive_icr(proxy: Proxy, query: str, docs: Sequence[Document]) -> torch.Tensor:
    """Two full eager passes with ``output_attentions`` over all layers; ICR per-token scores."""
    pieces = rerank_pieces(query, docs, list(range(len(docs))), family=proxy.chat_family)
    model = proxy.model
    model.set_attn_implementation("eager")
    try:
        per_pass = []
        for built in (
            assemble(pieces, proxy.tokenizer),
            assemble(with_query(pieces, CALIBRATION_QUERY), proxy.tokenizer),
        ):
            ids = torch.tensor([list(built.input_ids)], device=proxy.device)
            with torch.inference_mode():
                out = model(input_ids=ids, output_attentions=True)
            q = built.query_span.as_slice()
            prefix = built.query_span.start
            per_pass.append(sum(a[0, :, q, :prefix].mean(dim=1).sum(dim=0) for a in out.attentions))
    finally:
        model.set_attn_implementation("ragattn_sdpa")
    return per_pass[0] - per_pass[1]


def bench_attention(
    proxy: Proxy, data_dir: Path, *, n_docs: int = 20, doc_tokens: int = 100, runs: int = 5
) -> dict:
    """(a) naive eager two-pass ICR vs (b) the engine (row capture, early exit at the middle layers,
    KV reuse for the twin). Returns medians, ratio, prompt size and peak RSS."""
    query, docs = dl19_documents(data_dir, n_docs, doc_tokens, proxy)
    engine_scorer = IcrScorer(proxy, heads="middle", max_window_tokens=8192)
    order = list(range(len(docs)))
    n_tokens = len(
        assemble(rerank_pieces(query, docs, order, family=proxy.chat_family), proxy.tokenizer)
    )
    engine = time_runs("engine", lambda: engine_scorer.score(query, docs, order), runs)
    naive = time_runs("naive", lambda: naive_icr(proxy, query, docs), runs)
    return {
        "proxy": proxy.name,
        **runtime_info(proxy),
        "documents": len(docs),
        "prompt_tokens": n_tokens,
        "deepest_layer": engine_scorer.heads.deepest,
        "num_layers": proxy.num_layers,
        "naive_median_s": naive.median,
        "engine_median_s": engine.median,
        "speedup": naive.median / engine.median,
        "naive_runs_s": naive.seconds,
        "engine_runs_s": engine.seconds,
        "peak_rss_engine_mb": engine.peak_rss_mb,
        "peak_rss_after_naive_mb": naive.peak_rss_mb,
    }


def with_model(proxy: Proxy, model: object, dtype: torch.dtype | None = None) -> Proxy:
    """``proxy`` around another copy of its model (the copy gets its own attention engine)."""
    if hasattr(model, "_ragattn_engine"):
        del model._ragattn_engine
    return Proxy(
        name=proxy.name,
        model=model,
        tokenizer=proxy.tokenizer,
        chat_family=proxy.chat_family,
        dtype=proxy.dtype if dtype is None else dtype,
        load_seconds=proxy.load_seconds,
        source=proxy.source,
        device=proxy.device,
    )


def in_dtype(proxy: Proxy, dtype: torch.dtype) -> Proxy:
    """A copy of ``proxy`` whose weights and activations run in ``dtype`` (one run times both)."""
    return with_model(proxy, copy.deepcopy(proxy.model).to(dtype), dtype=dtype)


def int8_proxy(proxy: Proxy) -> Proxy:
    """A copy of ``proxy`` whose linear layers use int8 dynamic quantisation (fbgemm), as
    ``load_proxy(..., quantize="int8")`` loads it; the copy lets one run time both."""
    model = torch.ao.quantization.quantize_dynamic(
        copy.deepcopy(proxy.model), {torch.nn.Linear}, dtype=torch.qint8
    )
    return with_model(proxy, model)


def dl19_ndcg(
    proxy: Proxy, data_dir: Path, method: str, *, top_k: int = 20, limit: int = 43
) -> float:
    """nDCG@10 (trec_eval semantics) of ``method`` reranking the BM25 top ``top_k`` of the first
    ``limit`` DL19 queries: the quality side of a lever, measured on the lever's proxy copy."""
    from ragattn.lab.evaluation.datasets import load_candidates
    from ragattn.lab.evaluation.metrics import ndcg_at_10
    from ragattn.rerank import Reranker

    rset = load_candidates(
        data_dir / "candidates_bm25_top100.jsonl", data_dir / "qrels.trec.txt", top_k=top_k
    )
    reranker = Reranker(proxy, method=rerank_spec(method))
    run: dict[str, dict[str, float]] = {}
    for q in rset.queries[:limit]:
        docs = [Document(text=c.text, id=c.doc_id, title=c.title or None) for c in q.candidates]
        ranked = reranker.rerank(q.query, docs)
        run[q.qid] = {str(r.document.id): 1.0 / rank for rank, r in enumerate(ranked, start=1)}
    qrels = {qid: rset.qrels[qid] for qid in run if qid in rset.qrels}
    return ndcg_at_10(run, qrels)[0]


def bench_rerank(
    proxy: Proxy,
    data_dir: Path,
    *,
    methods: Sequence[str],
    n_docs: int = 20,
    queries: int = 10,
    proxies: Mapping[str, Proxy] | None = None,
) -> list[dict]:
    """Seconds per rerank call of each method over ``queries`` distinct DL19 queries, each with its
    first ``n_docs`` BM25 candidates.

    *Cold* calls have no cache hit: each method sees each query once, and the MiniLM vector cache
    is cleared before every call. After each cold call a *warm* call reranks the same passages for
    the next query of the run (a new query, passages seen before, as when a RAG service gets the
    same passages back for another question): whatever a method keeps per passage may be reused,
    nothing per query can be. The first row is the baseline of the ratios.

    A method written ``name@proxy`` runs on ``proxies[proxy]`` instead of ``proxy`` (the same
    method on two proxies, timed in one run).

    Returns one dict per method: the per-query cold seconds (``runs_s``), their median and mean,
    the ratio of the median to the first method's cold median, the warm seconds (``warm_runs_s``)
    and their median, and the warm median over the cold one, with :func:`runtime_info` of the
    proxy it ran on.
    """
    from ragattn.embed import shared_embedder
    from ragattn.lab.evaluation.datasets import load_candidates
    from ragattn.rerank import Reranker

    rset = load_candidates(
        data_dir / "candidates_bm25_top100.jsonl", data_dir / "qrels.trec.txt", top_k=n_docs
    )
    lists = [
        (q.query, [Document(text=c.text, id=c.doc_id, title=c.title or None) for c in q.candidates])
        for q in rset.queries[:queries]
    ]
    embedder = shared_embedder()
    rows: list[dict] = []
    medians: list[float] = []
    for method in methods:
        name, _, on = method.partition("@")
        if on and on not in (proxies or {}):
            raise ValueError(f"method {method!r} names proxy {on!r}, which is not in proxies")
        runs_on = (proxies or {})[on] if on else proxy
        reranker = Reranker(runs_on, method=rerank_spec(name))
        reranker.rerank("warm-up query about nothing", ["warm-up document."])
        seconds: list[float] = []
        warm: list[float] = []
        for i, (query, docs) in enumerate(lists):
            embedder.clear_cache()
            seconds.append(time_once(partial(reranker.rerank, query, docs)))
            other = lists[(i + 1) % len(lists)][0]
            if other == query:  # one query only: a new question all the same
                other = f"{query} (asked again in other words)"
            warm.append(time_once(partial(reranker.rerank, other, docs)))
        medians.append(statistics.median(seconds))
        rows.append(
            {
                **runtime_info(runs_on),
                "method": method,
                "proxy": runs_on.name,
                "queries": len(lists),
                "documents": n_docs,
                "runs_s": seconds,
                "median_s": medians[-1],
                "mean_s": statistics.fmean(seconds),
                "ratio_to_first": medians[-1] / medians[0],
                "warm_runs_s": warm,
                "warm_median_s": statistics.median(warm),
                "warm_to_cold": statistics.median(warm) / medians[-1],
            }
        )
    return rows


__all__ = [
    "bench_attention",
    "bench_rerank",
    "dl19_documents",
    "dl19_ndcg",
    "in_dtype",
    "int8_proxy",
    "naive_icr",
    "with_model",
]
