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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.lab.registry import rerank_spec
from ragattn.prompt import (
    CALIBRATION_QUERY,
    assemble,
    rerank_pieces,
    sentinel_pieces,
    shared_prefix_length,
    with_query,
)
from ragattn.proxy import Proxy, dtype_name, native_cpu_bf16
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


def runtime_info(proxy: Proxy) -> dict[str, str | int]:
    """Where a benchmark ran: the proxy's device and dtype, the CPU's vector capability
    (``torch.backends.cpu.get_cpu_capability()``: which kernels the CPU side used) and threads."""
    name = "cpu"
    if proxy.device.type == "cuda":
        name = torch.cuda.get_device_name(proxy.device)
    elif proxy.device.type == "mps":
        name = "Apple MPS"
    return {
        "device": str(proxy.device),
        "device_name": name,
        "dtype": dtype_name(proxy.dtype),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def runtime_line(info: dict[str, str | int]) -> str:
    """One line for the head of every benchmark table, from :func:`runtime_info`."""
    where = (
        info["device"] if info["device"] == "cpu" else f"{info['device']} ({info['device_name']})"
    )
    return (
        f"device {where}, dtype {info['dtype']}, cpu capability {info['cpu_capability']}, "
        f"{info['threads']} threads"
    )


def _synchronize() -> None:
    """Wait for queued CUDA kernels, so a timing covers the work and not only its launch."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_runs(name: str, fn: Callable[[], object], runs: int, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(runs):
        _synchronize()
        started = time.perf_counter()
        fn()
        _synchronize()
        seconds.append(time.perf_counter() - started)
    return Timing(name=name, seconds=tuple(seconds), peak_rss_mb=peak_rss_mb())


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


def naive_sentinel(proxy: Proxy, query: str, docs: Sequence[Document]) -> torch.Tensor:
    """One full eager pass of the Sentinel prompt with ``output_attentions`` over all layers; the
    last row's attention to the context, summed over heads and layers (the naive reading)."""
    built = assemble(sentinel_pieces(query, docs, family=proxy.chat_family), proxy.tokenizer)
    model = proxy.model
    model.set_attn_implementation("eager")
    try:
        ids = torch.tensor([list(built.input_ids)], device=proxy.device)
        with torch.inference_mode():
            out = model(input_ids=ids, output_attentions=True)
    finally:
        model.set_attn_implementation("ragattn_sdpa")
    return sum(a[0, :, -1, : built.query_span.start].sum(dim=0) for a in out.attentions)


def distinct_contexts(
    data_dir: Path, target_tokens: int, proxy: Proxy, count: int
) -> list[tuple[str, list[Document]]]:
    """``count`` contexts of about ``target_tokens`` proxy tokens with no paragraph in common:
    HotpotQA distractor questions in file order, each with its own and the following questions'
    paragraphs (so a "cold" run never meets a passage read before)."""
    rows = json.loads((data_dir / "hotpot_dev_distractor_v1.shared.json").read_text())
    out: list[tuple[str, list[Document]]] = []
    seen: set[str] = set()
    r = 0
    while len(out) < count and r < len(rows):
        query = rows[r]["question"]
        docs: list[Document] = []
        total = 0
        while total < target_tokens and r < len(rows):
            for title, sentences in rows[r]["context"]:
                text = " ".join(x.strip() for x in sentences if x.strip())
                if not text or text in seen:
                    continue
                seen.add(text)
                total += len(proxy.tokenizer(text, add_special_tokens=False)["input_ids"])
                docs.append(Document(text=text, title=title))
            r += 1
        out.append((query, docs))
    return out


def bench_read_once(
    proxy: Proxy,
    data_dir: Path,
    *,
    tokens: int = 2000,
    runs: int = 5,
    naive: bool = True,
    cascades: Sequence[Cascade] = (),
    naive_dtype: torch.dtype | None = torch.float32,
) -> list[dict]:
    """The default compressor with and without cached document blocks, over ``runs`` distinct
    contexts of about ``tokens`` proxy tokens: naive eager Sentinel forward (baseline), full
    prompt, read once with passages never seen (cold), and the same passages with a new question
    (warm); and the full prompt behind each of ``cascades``. Medians in seconds; ratios against
    the naive row.

    The naive baseline runs in ``naive_dtype`` (fp32, what reference code runs on a CPU; None:
    the proxy's own dtype), on a copy of the weights when the proxy runs another dtype, so that
    bf16 where ``dtype="auto"`` picks it counts as a lever against the same baseline."""

    from ragattn.blocks import BlockStore, bytes_per_token
    from ragattn.compress import Compressor
    from ragattn.embed import shared_embedder

    contexts = distinct_contexts(data_dir, tokens, proxy, runs + 1)
    warm_up, contexts = contexts[0], contexts[1:]
    full = Compressor(proxy, cascade=None)  # the whole context; cascades are rows of their own
    store = BlockStore(8 << 30)
    once = Compressor(proxy, read_once=store, cascade=None)
    cut = {_cascade_name(c): Compressor(proxy, cascade=c) for c in cascades}
    embedder = shared_embedder()
    for comp in (full, once, *cut.values()):
        comp.compress(warm_up[0], warm_up[1], ratio=0.2)  # first-call costs out of the timings
    baseline = proxy
    if naive_dtype is not None and proxy.dtype != naive_dtype:
        baseline = in_dtype(proxy, naive_dtype)
    timings: dict[str, list[float]] = {"naive": [], "full": [], "cold": [], "warm": []}
    timings.update({name: [] for name in cut})
    for query, docs in contexts:
        embedder.clear_cache()
        if naive:
            timings["naive"].append(_seconds(partial(naive_sentinel, baseline, query, docs)))
        timings["full"].append(_seconds(partial(full.compress, query, docs, ratio=0.2)))
        for name, comp in cut.items():
            embedder.clear_cache()
            timings[name].append(_seconds(partial(comp.compress, query, docs, ratio=0.2)))
        timings["cold"].append(_seconds(partial(once.compress, query, docs, ratio=0.2)))
        follow = f"Which of these is mentioned first? {query}"
        timings["warm"].append(_seconds(partial(once.compress, follow, docs, ratio=0.2)))
    stats = store.stats()
    base = statistics.median(timings["naive"]) if timings["naive"] else None
    names = {
        "naive": "naive: eager Sentinel forward, output_attentions, all layers, "
        + dtype_name(baseline.dtype),
        "full": f"compress, {full.method}, full prompt, whole context (no cascade), "
        + dtype_name(proxy.dtype),
        "cold": f"compress, {once.method}, read once: passages never seen (cold)",
        "warm": f"compress, {once.method}, read once: same passages, new question (warm)",
    }
    names.update(
        {
            name: f"compress, {full.method}, full prompt, {name}"
            + (" (default)" if c == DEFAULT_CASCADE else "")
            for name, c in zip(cut, cascades, strict=True)
        }
    )
    rows = []
    for key, seconds in timings.items():
        if not seconds:
            continue
        median = statistics.median(seconds)
        rows.append(
            {
                "variant": names[key],
                "median_s": median,
                "runs_s": seconds,
                "vs_naive": (base / median) if base else None,
            }
        )
    context_tokens = statistics.median(
        sum(len(proxy.tokenizer(d.text, add_special_tokens=False)["input_ids"]) for d in docs)
        for _, docs in contexts
    )
    for row in rows:
        row.update(
            {
                **runtime_info(proxy),
                "context_tokens": int(context_tokens),
                "documents": int(statistics.median(len(d) for _, d in contexts)),
                "block_store": stats,
                "bytes_per_token": bytes_per_token(proxy),
            }
        )
    return rows


def _cascade_name(cascade: Cascade) -> str:
    return (
        f"cascade {cascade.scorer}{'+links' if cascade.links else ''} keep {cascade.keep:g} "
        f"(contexts >= {cascade.min_tokens} tokens)"
    )


def _seconds(fn: Callable[[], object]) -> float:
    """Wall seconds of one call, the device synchronised on both sides."""
    _synchronize()
    started = time.perf_counter()
    fn()
    _synchronize()
    return time.perf_counter() - started


def bench_compress(
    proxy: Proxy,
    data_dir: Path,
    *,
    tokens: int = 2000,
    runs: int = 5,
    methods: Sequence[str] | None = None,
    reference_models_dir: Path | None = None,
    passes: bool = True,
) -> list[dict]:
    """Median seconds to compress a ~``tokens``-token context to 20 % with each method, and the
    one-pass ``rerank_and_compress`` against a separate rerank (ICR) plus compress call.

    ``reference_models_dir`` adds a row per attention probe method with the probes found there
    (e.g. the previous release's), timed in the same run as the current ones.
    """
    from ragattn.compress import Compressor
    from ragattn.embed import shared_embedder
    from ragattn.lab.registry import COMPRESS_METHODS
    from ragattn.rerank import Reranker

    query, docs = hotpot_context(data_dir, tokens, proxy)
    embedder = shared_embedder()
    rows = []
    variants: list[tuple[str, Compressor]] = [
        (f"compress, {m}", Compressor(proxy, method=COMPRESS_METHODS.spec(m)))
        for m in (methods or list(COMPRESS_METHODS))
    ]
    if reference_models_dir is not None:
        variants += [
            (
                f"compress, {m} (reference probes: {reference_models_dir})",
                Compressor(proxy, method=m, models_dir=reference_models_dir),
            )
            for m in ("fused", "sentinel")
        ]
    # The default's document-aware selection against scoring each sentence on its own (issue 28).
    plain = Compressor(proxy, selection="sentences")
    variants.append((f"compress, {plain.method}, selection=sentences", plain))
    for name, comp in variants:

        def cold(c: Compressor = comp) -> object:
            embedder.clear_cache()  # every run embeds the sentences afresh
            return c.compress(query, docs, ratio=0.2)

        timing = time_runs(name, cold, runs)
        rows.append({"variant": name, "median_s": timing.median, "runs_s": timing.seconds})
    default = Compressor(proxy)
    fresh = iter(range(10**6))
    timing = time_runs(
        "warm", lambda: default.compress(f"{query} ({next(fresh)})", docs, ratio=0.2), runs
    )
    rows.append(
        {
            "variant": f"compress, {default.method} (default), sentences seen before",
            "median_s": timing.median,
            "runs_s": timing.seconds,
        }
    )
    # Issue 28's joint call: both answers from one forward, against the rerank default and the
    # compress default called one after the other; cold, as the compress rows above.
    reranker_default = Reranker(proxy)

    def joint() -> object:
        embedder.clear_cache()
        return default.rerank_and_compress(query, docs, ratio=0.2)

    def separate() -> object:
        embedder.clear_cache()
        ranked = reranker_default.rerank(query, docs)
        return default.compress(query, [r.document for r in ranked], ratio=0.2)

    for name, call in (
        (f"rerank_and_compress, {default.method} (default), one forward", joint),
        (f"rerank ({reranker_default.method}) then compress ({default.method})", separate),
    ):
        timing = time_runs(name, call, runs)
        rows.append({"variant": name, "median_s": timing.median, "runs_s": timing.seconds})
    if not passes:
        return _with_context(rows, proxy, docs)
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
    return _with_context(rows, proxy, docs)


def _with_context(rows: list[dict], proxy: Proxy, docs: Sequence[Document]) -> list[dict]:
    """Every row gets the context size and the runtime (device, dtype, CPU capability)."""
    n_tokens = sum(len(proxy.tokenizer(d.text)["input_ids"]) for d in docs)
    for row in rows:
        row["context_tokens"] = n_tokens
        row["documents"] = len(docs)
        row.update(runtime_info(proxy))
    return rows


# --- levers: each optimisation of the rerank path, in one run against the naive baseline ---


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


def _with_model(proxy: Proxy, model: object, dtype: torch.dtype | None = None) -> Proxy:
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
    import copy

    return _with_model(proxy, copy.deepcopy(proxy.model).to(dtype), dtype=dtype)


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


def int8_proxy(proxy: Proxy) -> Proxy:
    """A copy of ``proxy`` whose linear layers use int8 dynamic quantisation (fbgemm), as
    ``load_proxy(..., quantize="int8")`` loads it; the copy lets one run time both."""
    import copy

    model = torch.ao.quantization.quantize_dynamic(
        copy.deepcopy(proxy.model), {torch.nn.Linear}, dtype=torch.qint8
    )
    return _with_model(proxy, model)


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
            seconds.append(_seconds(partial(reranker.rerank, query, docs)))
            other = lists[(i + 1) % len(lists)][0]
            if other == query:  # one query only: a new question all the same
                other = f"{query} (asked again in other words)"
            warm.append(_seconds(partial(reranker.rerank, other, docs)))
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
