"""``ragattn bench``: benchmarks of the rerank and compress paths (:mod:`ragattn.lab.bench`,
:mod:`ragattn.lab.bench_levers`, :mod:`ragattn.lab.bench_compress`), each reported as same-run
ratios against a naive baseline."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ragattn.cli._help import DTYPE_HELP

bench_app = typer.Typer(help="Benchmarks, reported as same-run ratios against a naive baseline.")

DEVICE_HELP = "Device: auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps."


@bench_app.command("attention")
def bench_attention_cmd(
    data: Path = typer.Option(
        Path("../shared/data/trec-dl-2019"), help="TREC DL19 folder (candidates)."
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    docs: int = typer.Option(20, help="Number of candidate documents."),
    doc_tokens: int = typer.Option(100, help="Proxy tokens per document."),
    runs: int = typer.Option(5, min=1, help="Timed runs per variant (median reported)."),
    threads: int | None = typer.Option(None, help="torch threads (default: one per core)."),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
    out: Path | None = typer.Option(None, help="Also write the result as JSON here."),
) -> None:
    """Naive eager two-pass ICR vs the engine (row capture, early exit, KV reuse), same run."""
    from ragattn.lab.bench import bench_attention
    from ragattn.lab.timing import runtime_line
    from ragattn.proxy import load_proxy

    loaded = load_proxy(proxy, device=device, dtype=dtype, threads=threads)
    result = bench_attention(loaded, data, n_docs=docs, doc_tokens=doc_tokens, runs=runs)
    typer.echo(
        f"{runtime_line(result)}\n"
        f"{result['documents']} docs, {result['prompt_tokens']} prompt tokens\n"
        f"| variant | median s | runs |\n|---|---|---|\n"
        f"| naive eager, all layers, 2 full passes | {result['naive_median_s']:.3f} | "
        f"{', '.join(f'{s:.2f}' for s in result['naive_runs_s'])} |\n"
        f"| engine (rows, exit after layer {result['deepest_layer']}, KV reuse) | "
        f"{result['engine_median_s']:.3f} | "
        f"{', '.join(f'{s:.2f}' for s in result['engine_runs_s'])} |\n"
        f"speed-up {result['speedup']:.1f}x; "
        f"peak RSS {result['peak_rss_engine_mb']:.0f} MiB (engine), "
        f"{result['peak_rss_after_naive_mb']:.0f} MiB (after naive)"
    )
    if out:
        out.write_text(json.dumps(result, indent=2))


@bench_app.command("levers")
def bench_levers_cmd(
    data: Path = typer.Option(
        Path("../shared/data/trec-dl-2019"), help="TREC DL19 folder (candidates)."
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    docs: int = typer.Option(20, help="Number of candidate documents."),
    doc_tokens: int = typer.Option(128, help="Proxy tokens per document (at most)."),
    scale_docs: int = typer.Option(100, help="Candidates for the cost-growth row."),
    runs: int = typer.Option(5, min=1, help="Timed runs per variant (median reported)."),
    threads: int | None = typer.Option(None, help="torch threads (default: one per core)."),
    bf16: bool = typer.Option(True, help="Include the (slow on AVX2) bf16 row."),
    quality: int = typer.Option(
        0, help="Also measure nDCG@10 of 'fused' fp32 vs int8 on the first N DL19 queries (top-20)."
    ),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
    out: Path | None = typer.Option(None, help="Also write the result as JSON here."),
) -> None:
    """Each lever of the rerank path, same run, as speed-ups over the naive two-pass eager ICR."""
    from ragattn.lab.bench_levers import bench_levers
    from ragattn.lab.timing import runtime_line
    from ragattn.proxy import load_proxy

    result = bench_levers(
        load_proxy(proxy, device=device, dtype=dtype, threads=threads),
        data,
        n_docs=docs,
        doc_tokens=doc_tokens,
        runs=runs,
        scale_docs=scale_docs,
        bf16=bf16,
        quality_queries=quality,
    )
    typer.echo(
        f"{runtime_line(result)}\n"
        f"{result['documents']} docs, {result['prompt_tokens']} prompt tokens, "
        f"medians of {runs} runs\n"
        "| lever | kept | median s | speed-up vs naive | max abs delta | note |\n"
        "|---|---|---|---|---|---|"
    )
    for row in result["rows"]:
        fid = "" if row["fidelity"] is None else f"{row['fidelity']:.1e}"
        typer.echo(
            f"| {row['lever']} | {'yes' if row['kept'] else 'no'} | {row['median_s']:.3f} | "
            f"{row['speedup']:.1f}x | {fid} | {row['note']} |"
        )
    for name, sc in result["scaling"].items():
        typer.echo(
            f"cost growth {name}: {sc['docs'][0]} -> {sc['docs'][1]} candidates "
            f"{sc['median_s'][0]:.3f} s -> {sc['median_s'][1]:.3f} s = {sc['ratio']:.2f}x "
            f"({sc['windows']} windows)"
        )
    for name, ndcg in result["quality_fused_dl19_top20"].items():
        typer.echo(f"quality: fused, {name}: nDCG@10 {ndcg:.4f} ({quality} DL19 queries, top-20)")
    typer.echo(f"peak RSS {result['peak_rss_mb']:.0f} MiB")
    if out:
        out.write_text(json.dumps(result, indent=2))


@bench_app.command("compress")
def bench_compress_cmd(
    data: Path = typer.Option(
        Path("../shared/data/hotpotqa"), help="HotpotQA folder (distractor dev)."
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    tokens: int = typer.Option(2000, help="Approximate context size in proxy tokens."),
    runs: int = typer.Option(5, min=1, help="Timed runs per variant (median reported)."),
    threads: int | None = typer.Option(None, help="torch threads (default: one per core)."),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
    method: str | None = typer.Option(
        None, help="Comma-separated compress methods (default: all)."
    ),
    reference_models_dir: Path | None = typer.Option(
        None,
        help="Also time the fused and sentinel probes found in this models folder (e.g. the "
        "previous release's), in the same run.",
    ),
    passes: bool = typer.Option(
        True, help="Also time one-pass rerank_and_compress against rerank then compress."
    ),
    read_once: bool = typer.Option(
        True,
        help="Also time the default over distinct contexts: the naive eager Sentinel forward, the "
        "full prompt, and passages read once (cold: never seen; warm: same passages, new "
        "question).",
    ),
    cascade: list[str] = typer.Option(
        [],
        help="With --read-once, also time the default behind another cascade than the default "
        "one (0.8:lexical+links, always timed), KEEP:SCORER[+links] (e.g. 0.8:lexical or "
        "0.8:bm25; repeatable), over the same distinct contexts.",
    ),
    out: Path | None = typer.Option(None, help="Write all rows as JSON."),
) -> None:
    """Compress a ~2,000-token context with every method; one-pass rerank+compress vs two calls;
    cold and warm (repeated passages) medians of the default, against the naive forward."""
    from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
    from ragattn.errors import InvalidInputError
    from ragattn.lab.bench_compress import bench_compress, bench_read_once
    from ragattn.lab.timing import runtime_line
    from ragattn.proxy import load_proxy

    try:
        extra = [Cascade.parse(spec) for spec in cascade]
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc)) from exc
    cascades = [DEFAULT_CASCADE, *(c for c in extra if c != DEFAULT_CASCADE)]
    loaded = load_proxy(proxy, device=device, dtype=dtype, threads=threads)
    cold_warm: list[dict] = []
    if read_once:
        cold_warm = bench_read_once(loaded, data, tokens=tokens, runs=runs, cascades=cascades)
        first = cold_warm[0]
        typer.echo(
            f"{runtime_line(first)}\n{runs} distinct contexts, median {first['documents']} "
            f"documents, {first['context_tokens']} proxy tokens; block store "
            f"{first['bytes_per_token']} bytes per token\n"
            "| variant | median s | vs naive | runs |\n|---|---|---|---|"
        )
        for row in cold_warm:
            ratio = f"{row['vs_naive']:.1f}x" if row["vs_naive"] else "-"
            typer.echo(
                f"| {row['variant']} | {row['median_s']:.3f} | {ratio} | "
                f"{', '.join(f'{s:.2f}' for s in row['runs_s'])} |"
            )
    rows = bench_compress(
        loaded,
        data,
        tokens=tokens,
        runs=runs,
        methods=[m.strip() for m in method.split(",")] if method else None,
        reference_models_dir=reference_models_dir,
        passes=passes,
    )
    typer.echo(
        f"{runtime_line(rows[0])}\n"
        f"{rows[0]['documents']} documents, {rows[0]['context_tokens']} proxy tokens\n"
        "| variant | median s | runs |\n|---|---|---|"
    )
    for row in rows:
        typer.echo(
            f"| {row['variant']} | {row['median_s']:.3f} | "
            f"{', '.join(f'{s:.2f}' for s in row['runs_s'])} |"
        )
    if out:
        out.write_text(json.dumps({"read_once": cold_warm, "methods": rows}, indent=2))


@bench_app.command("rerank")
def bench_rerank_cmd(
    data: Path = typer.Option(
        Path("../shared/data/trec-dl-2019"), help="TREC DL19 folder (candidates, qrels)."
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    method: str = typer.Option(
        "minilm,minilm-hyde",
        help="Comma-separated rerank methods; the first is the baseline. NAME@PROXY runs a method "
        "on another proxy (same device, dtype and threads), e.g. attention-probe@gemma3-270m.",
    ),
    docs: int = typer.Option(20, help="Candidates per query."),
    queries: int = typer.Option(
        10, min=1, help="Distinct DL19 queries: one cold and one warm call each."
    ),
    threads: int | None = typer.Option(None, help="torch threads (default: one per core)."),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
    out: Path | None = typer.Option(None, help="Also write the rows as JSON here."),
) -> None:
    """Seconds per rerank call of each method, same run: cold (distinct queries, no cache hit) and
    warm (the same passages with a new query)."""
    from ragattn.lab.bench import bench_rerank
    from ragattn.lab.timing import runtime_line
    from ragattn.proxy import load_proxy

    loaded = load_proxy(proxy, device=device, dtype=dtype, threads=threads)
    methods = [m.strip() for m in method.split(",") if m.strip()]
    others = {m.partition("@")[2] for m in methods} - {""}
    rows = bench_rerank(
        loaded,
        data,
        methods=methods,
        n_docs=docs,
        queries=queries,
        proxies={p: load_proxy(p, device=device, dtype=dtype, threads=threads) for p in others},
    )
    typer.echo(
        f"{runtime_line(rows[0])}\n{rows[0]['queries']} distinct queries x {docs} candidates\n"
        f"| method | cold: median s / call | mean s | x {rows[0]['method']} "
        "| warm (same passages, new query): median s | warm / cold |\n|---|---|---|---|---|---|"
    )
    for row in rows:
        typer.echo(
            f"| {row['method']} | {row['median_s']:.3f} | {row['mean_s']:.3f} | "
            f"{row['ratio_to_first']:.1f}x | {row['warm_median_s']:.3f} | "
            f"{row['warm_to_cold']:.2f} |"
        )
    if out:
        out.write_text(json.dumps(rows, indent=2))


@bench_app.command("startup")
def bench_startup(
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or GGUF path."),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
) -> None:
    """First start (dequantize the GGUF into an empty cache) vs second start \
(cached safetensors)."""
    import tempfile

    from ragattn.lab.timing import peak_rss_mb, runtime_info, runtime_line
    from ragattn.proxy import load_proxy

    with tempfile.TemporaryDirectory() as cache:
        first = load_proxy(proxy, device=device, dtype=dtype, cache_dir=cache).load_seconds
        loaded = load_proxy(proxy, device=device, dtype=dtype, cache_dir=cache)
    second = loaded.load_seconds
    typer.echo(runtime_line(runtime_info(loaded)))
    typer.echo(
        f"{proxy}: first start {first:.1f} s, second start {second:.2f} s, "
        f"peak RSS {peak_rss_mb():.0f} MiB"
    )
