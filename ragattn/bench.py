"""Benchmarks of the attention engine, measured as same-run ratios against the naive baseline.

The naive baseline is what the ICR reference code does without its optimisations: eager attention
with ``output_attentions=True`` over all layers (every L×H×n×n matrix materialised), two full
passes (the query and the ``N/A`` twin). The engine runs SDPA with only the query rows recomputed,
stops after the deepest selected layer, and encodes the documents once for both passes.
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ragattn.prompt import CALIBRATION_QUERY, assemble, rerank_pieces, with_query
from ragattn.proxy import Proxy
from ragattn.rerank.icr import IcrScorer
from ragattn.types import Document


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Wall-clock seconds of repeated runs of one variant, and the process's peak RSS after them."""

    name: str
    seconds: tuple[float, ...]
    peak_rss_mb: float

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_runs(name: str, fn: Callable[[], object], runs: int, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    return Timing(name=name, seconds=tuple(seconds), peak_rss_mb=peak_rss_mb())


def dl19_documents(
    data_dir: Path, n_docs: int, doc_tokens: int, proxy: Proxy
) -> tuple[str, list[Document]]:
    """The first DL19 query and its first ``n_docs`` BM25 candidates cut to ``doc_tokens`` proxy tokens."""
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
            with torch.inference_mode():
                out = model(input_ids=torch.tensor([list(built.input_ids)]), output_attentions=True)
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
        "threads": torch.get_num_threads(),
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


def hotpot_context(data_dir: Path, target_tokens: int, proxy: Proxy) -> tuple[str, list[Document]]:
    """The first HotpotQA distractor question and as many of its questions' paragraphs (in file
    order, across questions) as make about ``target_tokens`` proxy tokens."""
    rows = json.loads((data_dir / "hotpot_dev_distractor_v1.shared.json").read_text())
    query = rows[0]["question"]
    docs: list[Document] = []
    total = 0
    for row in rows:
        for title, sentences in row["context"]:
            text = " ".join(s.strip() for s in sentences if s.strip())
            total += len(proxy.tokenizer(text, add_special_tokens=False)["input_ids"])
            docs.append(Document(text=text, title=title))
            if total >= target_tokens:
                return query, docs
    return query, docs


def bench_compress(
    proxy: Proxy, data_dir: Path, *, tokens: int = 2000, runs: int = 5
) -> list[dict]:
    """Median seconds to compress a ~``tokens``-token context to 20 % with each method, and the
    one-pass ``rerank_and_compress`` against a separate rerank (ICR) plus compress call."""
    from ragattn.compress import METHODS, Compressor
    from ragattn.rerank import Reranker

    query, docs = hotpot_context(data_dir, tokens, proxy)
    rows = []
    for method in METHODS:
        comp = Compressor(proxy, method=method)
        timing = time_runs(method, lambda c=comp: c.compress(query, docs, ratio=0.2), runs)
        rows.append(
            {"variant": f"compress, {method}", "median_s": timing.median, "runs_s": timing.seconds}
        )
    comp = Compressor(proxy, method="fused")
    reranker = Reranker(proxy, method="icr")
    one = time_runs(
        "one-pass", lambda: comp.rerank_and_compress(query, docs, top_n=5, ratio=0.2), runs
    )
    two = time_runs(
        "two calls",
        lambda: comp.compress(
            query, [r.document for r in reranker.rerank(query, docs, top_n=5)], ratio=0.2
        ),
        runs,
    )
    rows.append(
        {
            "variant": "rerank_and_compress (fused, one pass)",
            "median_s": one.median,
            "runs_s": one.seconds,
        }
    )
    rows.append(
        {
            "variant": "rerank (icr) then compress (fused)",
            "median_s": two.median,
            "runs_s": two.seconds,
        }
    )
    n_tokens = sum(len(proxy.tokenizer(d.text)["input_ids"]) for d in docs)
    for row in rows:
        row["context_tokens"] = n_tokens
        row["documents"] = len(docs)
    return rows
