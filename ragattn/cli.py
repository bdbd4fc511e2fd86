"""The ``ragattn`` command line: builds settings at the edge and calls the library.

Sub-command groups live next to what they drive (``ragattn.retrieve.cli``,
``ragattn.evaluation.cli`` ...) and are attached here; heavy imports happen inside commands so
``ragattn --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ragattn.evaluation.cli import eval_app
from ragattn.pipeline_cli import ask
from ragattn.rerank.heads_cli import heads_detect
from ragattn.retrieve.cli import index_app

app = typer.Typer(
    name="ragattn",
    help="Attention-based reranking and compression of retrieved context for RAG.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# --- sub-command groups (one line each; keep this block sorted) ---
bench_app = typer.Typer(help="Benchmarks, reported as same-run ratios against a naive baseline.")
app.add_typer(bench_app, name="bench")
heads_app = typer.Typer(help="Rerank head profiles: select query-focused heads and fit the fusion.")
app.add_typer(heads_app, name="heads")
heads_app.command("detect")(heads_detect)
probe_app = typer.Typer(
    help="Sentence probes for compression: train on the shared training material."
)
app.add_typer(probe_app, name="probe")
app.add_typer(index_app, name="index")
app.add_typer(eval_app, name="eval")
app.command("ask")(ask)


@app.command()
def demo(
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    ratio: float = typer.Option(0.3, help="Fraction of context tokens to keep."),
    top_n: int = typer.Option(3, help="Documents to keep after reranking."),
) -> None:
    """Rerank and compress a built-in example with the packaged proxy (no Redis, no index)."""
    import time

    from rich.console import Console
    from rich.table import Table

    from ragattn.compress import Compressor
    from ragattn.demo import DOCUMENTS, QUERY
    from ragattn.proxy import load_proxy
    from ragattn.rerank import Reranker

    console = Console()
    loaded = load_proxy(proxy)
    console.print(f"proxy [bold]{loaded.name}[/] loaded in {loaded.load_seconds:.1f} s")
    console.print(f"query: [bold]{QUERY}[/]")
    started = time.perf_counter()
    ranked = Reranker(loaded).rerank(QUERY, DOCUMENTS, top_n=top_n)
    rerank_s = time.perf_counter() - started
    table = Table(title=f"rerank ({ranked.method}, {rerank_s:.2f} s)")
    for col in ("rank", "input index", "id", "relevance_score", "raw_score"):
        table.add_column(col)
    for rank, res in enumerate(ranked, start=1):
        table.add_row(
            str(rank),
            str(res.index),
            str(res.document.id),
            f"{res.relevance_score:.3f}",
            f"{res.raw_score:.3f}",
        )
    console.print(table)
    started = time.perf_counter()
    out = Compressor(loaded).compress(QUERY, [r.document for r in ranked], ratio=ratio)
    compress_s = time.perf_counter() - started
    console.print(
        f"compress ({out.method}, {compress_s:.2f} s): "
        f"{out.origin_tokens} -> {out.compressed_tokens} tokens "
        f"(ratio {out.ratio:.2f}, counted with {out.tokenizer})"
    )
    console.print(out.compressed_text, markup=False)
    for warning in (*ranked.warnings, *out.warnings):
        console.print(f"[yellow]warning:[/] {warning}")


@app.command()
def version() -> None:
    """Print the ragattn version."""
    from ragattn import __version__

    typer.echo(__version__)


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
    out: Path | None = typer.Option(None, help="Also write the result as JSON here."),
) -> None:
    """Naive eager two-pass ICR vs the engine (row capture, early exit, KV reuse), same run."""
    import json

    from ragattn.bench import bench_attention
    from ragattn.proxy import load_proxy

    result = bench_attention(
        load_proxy(proxy, threads=threads), data, n_docs=docs, doc_tokens=doc_tokens, runs=runs
    )
    typer.echo(
        f"{result['documents']} docs, {result['prompt_tokens']} prompt tokens, "
        f"{result['threads']} threads\n"
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
    out: Path | None = typer.Option(None, help="Also write the result as JSON here."),
) -> None:
    """Each lever of the rerank path, same run, as speed-ups over the naive two-pass eager ICR."""
    import json

    from ragattn.bench import bench_levers
    from ragattn.proxy import load_proxy

    result = bench_levers(
        load_proxy(proxy, threads=threads),
        data,
        n_docs=docs,
        doc_tokens=doc_tokens,
        runs=runs,
        scale_docs=scale_docs,
        bf16=bf16,
        quality_queries=quality,
    )
    typer.echo(
        f"{result['documents']} docs, {result['prompt_tokens']} prompt tokens, "
        f"{result['threads']} threads, medians of {runs} runs\n"
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
) -> None:
    """Compress a ~2,000-token context with every method; one-pass rerank+compress vs two calls."""
    from ragattn.bench import bench_compress
    from ragattn.proxy import load_proxy

    rows = bench_compress(load_proxy(proxy, threads=threads), data, tokens=tokens, runs=runs)
    typer.echo(
        f"{rows[0]['documents']} documents, {rows[0]['context_tokens']} proxy tokens\n"
        "| variant | median s | runs |\n|---|---|---|"
    )
    for row in rows:
        typer.echo(
            f"| {row['variant']} | {row['median_s']:.3f} | "
            f"{', '.join(f'{s:.2f}' for s in row['runs_s'])} |"
        )


@bench_app.command("startup")
def bench_startup(
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or GGUF path."),
) -> None:
    """First start (dequantize the GGUF into an empty cache) vs second start \
(cached safetensors)."""
    import tempfile

    from ragattn.bench import peak_rss_mb
    from ragattn.proxy import load_proxy

    with tempfile.TemporaryDirectory() as cache:
        first = load_proxy(proxy, cache_dir=cache).load_seconds
        second = load_proxy(proxy, cache_dir=cache).load_seconds
    typer.echo(
        f"{proxy}: first start {first:.1f} s, second start {second:.2f} s, "
        f"peak RSS {peak_rss_mb():.0f} MiB"
    )


@probe_app.command("train")
def probe_train(
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder."),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    per_source: int = typer.Option(100, min=1, help="Training questions per source."),
    models_dir: Path | None = typer.Option(
        None, help="Where to write models/<proxy>/ (default: repo models/)."
    ),
    features_cache: Path | None = typer.Option(
        None, help="Reuse/save extracted features here (.npz)."
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
) -> None:
    """Extract features on training data and fit the fused, sentinel and lexical probes."""
    from ragattn.compress import PROBE_METHODS, default_models_dir, proxy_slug
    from ragattn.compress.card import fit_all
    from ragattn.proxy import load_proxy

    loaded = load_proxy(proxy, threads=threads)
    out_dir = (models_dir or default_models_dir()) / proxy_slug(loaded)
    report = fit_all(
        loaded,
        data,
        out_dir,
        per_source=per_source,
        features_cache=features_cache,
        methods=PROBE_METHODS,
    )
    typer.echo(report)


@app.command()
def serve(
    host: str | None = typer.Option(
        None, help="Bind address (default: RAGATTN_HOST or 127.0.0.1)."
    ),
    port: int | None = typer.Option(None, help="Port (default: RAGATTN_PORT or 8080)."),
) -> None:
    """Serve the HTTP API; other settings come from RAGATTN_* variables (see docs/service.md)."""
    import dataclasses

    from ragattn._optional import require
    from ragattn.errors import ConfigError
    from ragattn.settings import Settings

    uvicorn = require("uvicorn", extra="api")
    require("litestar", extra="api")
    from api.app import create_app

    try:
        settings = Settings.from_env()
        settings = dataclasses.replace(
            settings, host=host or settings.host, port=port or settings.port
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    from ragattn.memory import tune_malloc

    tune_malloc()  # before the model loads: keeps the resident set near the weights' size
    # One process: the proxy is loaded once and the worker queue, cache and rate limits are shared.
    app = create_app(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            # On SIGTERM in-flight requests get this long to finish before the lifespan closes.
            timeout_graceful_shutdown=settings.shutdown_grace_s or None,
        )
    )
    # The model loads in the background (/ready is 503 meanwhile); a failed load stops the server.
    app.state.on_load_failure = lambda: setattr(server, "should_exit", True)
    server.run()
    if app.state.load_error is not None:
        typer.echo(f"error: the model failed to load: {app.state.load_error}", err=True)
        raise typer.Exit(1)


@heads_app.command("select")
def heads_select(
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder."),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    per_source: int = typer.Option(40, min=1, help="Training questions per source."),
    top_k: int = typer.Option(16, min=1, help="Heads to keep."),
    models_dir: Path | None = typer.Option(
        None, help="Where to write models/<proxy>/ (default: repo models/)."
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
    scifact: bool = typer.Option(
        False, help="Add SciFact train claims (BM25 top-20 over the corpus) as a fourth source."
    ),
) -> None:
    """QRHead selection and rank fusion on training questions; writes \
models/<proxy>/rerank-profile.json."""
    import datetime as dt

    import numpy as np

    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.attention import HeadSet
    from ragattn.proxy import load_proxy
    from ragattn.rerank import training

    loaded = load_proxy(proxy, threads=threads)
    examples = training.load_rerank_training(data, per_source, scifact=scifact)
    table = training.extract(loaded, examples)
    heads = HeadSet.from_layers(loaded.full_attention_layers(), loaded.num_heads)
    chosen, scores = training.select_heads(table, heads, top_k)
    index = [heads.pairs.index(p) for p in chosen]
    fusion = {}
    for key, attention in (("attention", True), ("lexical", False)):
        coef, intercept = training.fit_fusion(table, index, attention=attention)
        fusion[key] = {"coef": coef.tolist(), "intercept": intercept}
    train_ndcg = {
        "bm25": float(
            np.mean(
                [
                    training.ndcg(b, labels)
                    for b, labels in zip(table.bm25, table.labels, strict=True)
                ]
            )
        ),
        "minilm": float(
            np.mean(
                [
                    training.ndcg(d, labels)
                    for d, labels in zip(table.dense, table.labels, strict=True)
                ]
            )
        ),
        "icr_all_heads": float(
            np.mean(
                [
                    training.ndcg(m.sum(axis=1), labels)
                    for m, labels in zip(table.masses, table.labels, strict=True)
                ]
            )
        ),
        "qrhead": float(
            np.mean(
                [
                    training.ndcg(m[:, index].sum(axis=1), labels)
                    for m, labels in zip(table.masses, table.labels, strict=True)
                ]
            )
        ),
    }
    counts: dict[str, int] = {}
    for ex in examples:
        counts[ex.source] = counts.get(ex.source, 0) + 1
    payload = {
        "proxy": loaded.name,
        "heads": [list(p) for p in chosen],
        "head_train_ndcg": scores,
        "fusion": fusion,
        "fusion_features": {
            "attention": ["qrhead", "bm25", "minilm", "rank_prior"],
            "lexical": ["bm25", "minilm", "rank_prior"],
        },
        "train_ndcg_at_10": train_ndcg,
        "training_questions": counts,
        "command": f"ragattn heads select --per-source {per_source} --top-k {top_k}",
        "date": dt.date.today().isoformat(),
    }
    out_dir = (models_dir or default_models_dir()) / proxy_slug(loaded)
    training.write_profile(out_dir, payload)
    typer.echo(
        json.dumps(
            {k: payload[k] for k in ("heads", "train_ndcg_at_10", "training_questions")}, indent=1
        )
    )


if __name__ == "__main__":
    app()
