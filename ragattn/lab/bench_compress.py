"""Benchmarks of the compress path: each compress method, the joint rerank-and-compress call and
passages read once (cached document blocks), timed in one run against the naive Sentinel forward
(eager attention, ``output_attentions`` over all layers).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import torch

from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.devices import dtype_name
from ragattn.lab.bench import in_dtype
from ragattn.lab.timing import runtime_info, time_once, time_runs
from ragattn.prompt import assemble, sentinel_pieces
from ragattn.proxy import Proxy
from ragattn.types import Document


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

    from ragattn.block_store import BlockStore, bytes_per_token
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
            timings["naive"].append(time_once(partial(naive_sentinel, baseline, query, docs)))
        timings["full"].append(time_once(partial(full.compress, query, docs, ratio=0.2)))
        for name, comp in cut.items():
            embedder.clear_cache()
            timings[name].append(time_once(partial(comp.compress, query, docs, ratio=0.2)))
        timings["cold"].append(time_once(partial(once.compress, query, docs, ratio=0.2)))
        follow = f"Which of these is mentioned first? {query}"
        timings["warm"].append(time_once(partial(once.compress, follow, docs, ratio=0.2)))
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


__all__ = [
    "bench_compress",
    "bench_read_once",
    "distinct_contexts",
    "hotpot_context",
    "naive_sentinel",
]
