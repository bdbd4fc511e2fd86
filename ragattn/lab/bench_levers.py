"""Every lever of the rerank path in one run: query-row capture, KV reuse for the ``N/A`` twin,
early exit, threads, int8, bf16 and whole methods, as same-run ratios against the naive baseline
(eager attention, ``output_attentions`` over all layers, two full passes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.devices import dtype_name, native_cpu_bf16
from ragattn.lab.bench import dl19_documents, dl19_ndcg, in_dtype, int8_proxy, naive_icr
from ragattn.lab.timing import Timing, peak_rss_mb, runtime_info, time_runs
from ragattn.prompt import (
    CALIBRATION_QUERY,
    assemble,
    rerank_pieces,
    shared_prefix_length,
    with_query,
)
from ragattn.proxy import Proxy
from ragattn.types import Document


@dataclass(frozen=True, slots=True, kw_only=True)
class LeverRow:
    """One measured variant of the rerank path.

    ``fidelity`` is the largest absolute difference of the calibrated per-token attention deltas
    (probability units, summed over the selected heads) from the fp32 reference of the same heads;
    ``None`` where the variant computes another quantity (whole methods, other candidate counts).
    """

    lever: str
    kept: bool
    median_s: float
    runs_s: tuple[float, ...]
    speedup: float
    fidelity: float | None
    note: str


def _icr_deltas(
    proxy: Proxy,
    query: str,
    docs: Sequence[Document],
    heads: HeadSet,
    *,
    shared_prefix: bool,
    early_exit: bool,
) -> torch.Tensor:
    """``[heads, prefix]`` calibrated attention (real minus ``N/A`` query) of one listwise window,
    by two full passes or by one document prefix shared through the KV cache."""
    engine = engine_for(proxy)
    pieces = rerank_pieces(query, docs, list(range(len(docs))), family=proxy.chat_family)
    real = assemble(pieces, proxy.tokenizer)
    twin = assemble(with_query(pieces, CALIBRATION_QUERY), proxy.tokenizer)
    rows_r = list(range(real.query_span.start, real.query_span.end))
    rows_t = list(range(twin.query_span.start, twin.query_span.end))
    prefix = min(shared_prefix_length(real, twin), real.query_span.start, twin.query_span.start)
    if shared_prefix:
        s, c = engine.capture_shared_prefix(
            real.input_ids[:prefix],
            [(real.input_ids[prefix:], rows_r), (twin.input_ids[prefix:], rows_t)],
            heads,
            early_exit=early_exit,
        )
    else:
        s = engine.capture(real.input_ids, rows_r, heads, early_exit=early_exit)
        c = engine.capture(twin.input_ids, rows_t, heads, early_exit=early_exit)
    return s.weights[:, 0, :prefix] - c.weights[:, 0, :prefix]


def bench_levers(
    proxy: Proxy,
    data_dir: Path,
    *,
    n_docs: int = 20,
    doc_tokens: int = 128,
    runs: int = 5,
    scale_docs: int = 100,
    bf16: bool = True,
    quality_queries: int = 0,
) -> dict:
    """Every lever of the rerank path on one DL19 query, as same-run ratios against the naive
    baseline (eager attention, ``output_attentions`` over all layers, two full passes).

    Rows, in order: naive; query-row capture on SDPA (two passes, all layers); + KV reuse for the
    ``N/A`` twin; + early exit after the deepest QRHead layer; thread count; int8 dynamic
    quantisation; bf16; whole methods (``fused`` and ``attention-probe`` with attention, the default
    cold and with its embedding LRU warm); and cost growth from ``n_docs`` to ``scale_docs``.
    """

    from ragattn.embed import shared_embedder
    from ragattn.rerank import Reranker
    from ragattn.rerank.profiles import load_rerank_profile
    from ragattn.types import RerankResults

    query, docs = dl19_documents(data_dir, max(n_docs, scale_docs), doc_tokens, proxy)
    few = docs[:n_docs]
    profile = load_rerank_profile(proxy)
    every = HeadSet.all(proxy.num_layers, proxy.num_heads)
    qr = profile.heads
    threads = torch.get_num_threads()
    rows: list[LeverRow] = []

    naive = time_runs("naive", lambda: naive_icr(proxy, query, few), runs)

    def add(lever: str, kept: bool, timing: Timing, fidelity: float | None, note: str) -> None:
        rows.append(
            LeverRow(
                lever=lever,
                kept=kept,
                median_s=timing.median,
                runs_s=timing.seconds,
                speedup=naive.median / timing.median,
                fidelity=fidelity,
                note=note,
            )
        )

    add(
        "naive: eager, output_attentions, all layers, 2 full passes", False, naive, None, "baseline"
    )

    def deltas(p: Proxy, heads: HeadSet, shared: bool, exit_: bool) -> torch.Tensor:
        return _icr_deltas(p, query, few, heads, shared_prefix=shared, early_exit=exit_)

    ref_all = deltas(proxy, every, False, False)
    ref_qr = deltas(proxy, qr, False, False)

    def err(x: torch.Tensor, ref: torch.Tensor) -> float:
        return float((x.sum(0) - ref.sum(0)).abs().max())

    timing = time_runs("rows", lambda: deltas(proxy, every, False, False), runs)
    add("query-row capture on SDPA (2 passes, all layers)", True, timing, 0.0, "exact by test")
    timing = time_runs("kv", lambda: deltas(proxy, every, True, False), runs)
    add(
        "+ KV reuse: documents encoded once for query and N/A",
        True,
        timing,
        err(deltas(proxy, every, True, False), ref_all),
        "",
    )
    timing = time_runs("exit", lambda: deltas(proxy, qr, True, True), runs)
    add(
        f"+ early exit after layer {qr.deepest} (QRHead profile, {len(qr)} heads)",
        True,
        timing,
        err(deltas(proxy, qr, True, True), ref_qr),
        f"{qr.deepest + 1}/{proxy.num_layers} layers run",
    )
    torch.set_num_threads(1)
    try:
        timing = time_runs("1 thread", lambda: deltas(proxy, qr, True, True), runs)
    finally:
        torch.set_num_threads(threads)
    add(f"threads 1 (vs {threads})", threads == 1, timing, 0.0, "")

    on_cpu = proxy.device.type == "cpu"
    quant = int8_proxy(proxy) if on_cpu else None  # dynamic int8 has CPU kernels only
    if quant is not None:
        timing = time_runs("int8", lambda: deltas(quant, qr, True, True), runs)
        add(
            "int8 dynamic quantisation of the linear layers",
            False,
            timing,
            err(deltas(quant, qr, True, True), ref_qr),
            f"fbgemm on {torch.backends.cpu.get_cpu_capability()}",
        )
    half: Proxy | None = None
    if bf16 and proxy.dtype != torch.bfloat16:
        half = in_dtype(proxy, torch.bfloat16)
        timing = time_runs("bf16", lambda: deltas(half, qr, True, True), 1, warmup=0)
        add(
            "bf16 weights and activations",
            False,
            timing,
            err(deltas(half, qr, True, True), ref_qr),
            f"1 run; cpu capability {torch.backends.cpu.get_cpu_capability()}"
            if on_cpu
            else "1 run",
        )

    fused = Reranker(proxy, method="fused")
    timing = time_runs("fused", lambda: fused.rerank(query, few), runs)
    add("method fused (QRHead attention + BM25 + MiniLM)", False, timing, None, "whole method")
    embedder = shared_embedder()

    def cold_call(reranker: Reranker) -> Callable[[], object]:
        """One call over documents new to MiniLM (its LRU cleared first)."""

        def call() -> object:
            embedder.clear_cache()
            return reranker.rerank(query, few)

        return call

    probe = Reranker(proxy, method="attention-probe")
    timing = time_runs("attention-probe", cold_call(probe), runs)
    add(
        "method attention-probe (document probe on MiniLM), documents new",
        False,
        timing,
        None,
        "whole method; the shipped attention reranker",
    )
    if half is not None:
        # What dtype="auto" serves on a CPU with native bf16 (AVX-512 BF16 or AMX), against the
        # same fp32 naive baseline: the packaged probe reads bf16 features (probe_accepts_dtype).
        half_probe = Reranker(half, method="attention-probe")
        timing = time_runs("attention-probe bf16", cold_call(half_probe), runs)
        add(
            "method attention-probe in bf16, documents new",
            False,
            timing,
            None,
            "whole method; dtype='auto' on a CPU with native bf16"
            if on_cpu and native_cpu_bf16()
            else "whole method; bf16 is emulated on this device",
        )
    default = Reranker(proxy)
    timing = time_runs("default cold", cold_call(default), runs)
    add(f"method {default.method} (default), documents new", True, timing, None, "whole method")
    fresh_queries = iter(range(10**6))
    timing = time_runs(
        "default warm", lambda: default.rerank(f"{query} ({next(fresh_queries)})", few), runs
    )
    add(
        f"method {default.method}, documents seen before (embedding LRU)",
        True,
        timing,
        None,
        "a new query each run; only the query is encoded",
    )
    scaling = {}
    for name, reranker in (("fused", fused), (default.method, default)):

        def run(subset: Sequence[Document], r: Reranker = reranker) -> RerankResults:
            embedder.clear_cache()
            return r.rerank(query, subset)

        small = time_runs(name, partial(run, few), runs)
        big = time_runs(name, partial(run, docs), runs)
        scaling[name] = {
            "docs": [n_docs, len(docs)],
            "median_s": [small.median, big.median],
            "ratio": big.median / small.median,
            "windows": run(docs).windows,
        }
    n_tokens = len(
        assemble(
            rerank_pieces(query, few, list(range(len(few))), family=proxy.chat_family),
            proxy.tokenizer,
        )
    )
    quality = {}
    if quality_queries:
        variants = [(dtype_name(proxy.dtype), proxy)] + ([("int8", quant)] if quant else [])
        for name, variant in variants:
            quality[name] = dl19_ndcg(variant, data_dir, "fused", limit=quality_queries)
    return {
        "quality_fused_dl19_top20": quality,
        "quality_queries": quality_queries,
        "proxy": proxy.name,
        **runtime_info(proxy),
        "threads": threads,
        "documents": len(few),
        "prompt_tokens": n_tokens,
        "rows": [asdict(r) for r in rows],
        "scaling": scaling,
        "peak_rss_mb": peak_rss_mb(),
    }


__all__ = ["LeverRow", "bench_levers"]
