"""``ragattn ask``: answer a question end to end over a built index (retrieve, one read that ranks
and prunes the candidates, generate; or ``--flow two_pass``: rerank, keep the best, compress) and
show the answer, its sources with scores, the compression and per-stage timings.

Heavy imports happen inside the command so that ``ragattn --help`` stays fast. The rerank and
compress methods come from ``RAGATTN_RERANK_METHOD`` / ``RAGATTN_COMPRESS_METHOD``; ``ask --help``
lists them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

_GENERATORS = ("local", "openai")


def ask(
    question: Annotated[str, typer.Argument(help="the question to answer")],
    index: Annotated[
        Path | None, typer.Option(help="index directory written by 'ragattn index build'")
    ] = None,
    flow: Annotated[
        str,
        typer.Option(
            help="one_read: one proxy read of every candidate ranks them and keeps their best "
            "sentences; two_pass: rerank, keep --top-n, compress those"
        ),
    ] = "one_read",
    top_k: Annotated[int, typer.Option(min=1, help="passages retrieved from the index")] = 20,
    top_n: Annotated[
        int | None,
        typer.Option(min=1, help="passages kept after ranking (default: all for one_read, 5)"),
    ] = None,
    ratio: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="fraction of context tokens kept (default: 0.2 for one_read, 0.5 for two_pass)",
        ),
    ] = None,
    order: Annotated[
        str | None,
        typer.Option(help="context order: best_first, best_last or edges (default: measured)"),
    ] = None,
    mode: Annotated[str, typer.Option(help="search mode: hybrid, bm25 or dense")] = "hybrid",
    rerank: Annotated[bool, typer.Option("--rerank/--no-rerank", help="rerank the hits")] = True,
    compress: Annotated[
        bool, typer.Option("--compress/--no-compress", help="compress the passages")
    ] = True,
    generator: Annotated[
        str | None,
        typer.Option(
            help="local (the proxy) or openai (default when RAGATTN_GENERATOR_BASE_URL is set)"
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible API root incl. /v1 (default RAGATTN_GENERATOR_BASE_URL)"
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="model sent to the endpoint (default RAGATTN_GENERATOR_MODEL)"),
    ] = None,
    api_key_env: Annotated[
        str, typer.Option(help="environment variable holding the endpoint's API key")
    ] = "OPENAI_API_KEY",
    max_tokens: Annotated[int, typer.Option(min=1, help="most tokens generated")] = 64,
    timeout: Annotated[float, typer.Option(help="seconds per generator request")] = 60.0,
    proxy: Annotated[
        str | None, typer.Option(help="proxy model (default: RAGATTN_PROXY or smollm2-135m)")
    ] = None,
    threads: Annotated[
        int | None, typer.Option(help="torch threads (default: RAGATTN_THREADS)")
    ] = None,
) -> None:
    """Answer QUESTION from an index: retrieve, read the candidates once (rank and prune), generate.

    The methods are RAGATTN_RERANK_METHOD and RAGATTN_COMPRESS_METHOD, one of those listed below.
    """
    from ragattn.errors import RagattnError
    from ragattn.pipeline import DEFAULT_ORDER, FLOWS, PipelineOptions, load_index
    from ragattn.settings import Settings

    try:
        settings = Settings.from_env()
        loaded_index = load_index(index)
        if flow not in FLOWS:
            raise _usage(f"--flow must be one of {', '.join(FLOWS)}, got {flow!r}")
        options = PipelineOptions(
            flow=flow,  # type: ignore[arg-type]
            top_k=top_k,
            top_n=top_n,
            ratio=ratio,
            order=(order or DEFAULT_ORDER),  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            rerank=rerank,
            compress=compress,
        )
        generator = generator or ("openai" if settings.generator_base_url else "local")
        if generator not in _GENERATORS:
            raise _usage(f"--generator must be one of {', '.join(_GENERATORS)}, got {generator!r}")
        pipeline = _build(
            loaded_index,
            settings=settings,
            generator=generator,
            base_url=base_url or settings.generator_base_url,
            model=model or settings.generator_model,
            api_key=os.environ.get(api_key_env) or settings.generator_api_key,
            max_tokens=max_tokens,
            timeout=timeout,
            proxy=proxy or settings.proxy,
            threads=threads if threads is not None else settings.threads,
            rerank=rerank,
            compress=compress,
        )
        result = pipeline.ask(question, options)
    except RagattnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    _show(result)


def _usage(message: str) -> Exception:
    from ragattn.errors import InvalidInputError

    return InvalidInputError(message)


def _build(
    index: Any,
    *,
    settings: Any,
    generator: str,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
    max_tokens: int,
    timeout: float,
    proxy: str,
    threads: int | None,
    rerank: bool,
    compress: bool,
) -> Any:
    from ragattn.cache import MemoryCache
    from ragattn.compress import Compressor
    from ragattn.generate import LocalGenerator, OpenAIChatGenerator
    from ragattn.pipeline import RAGPipeline
    from ragattn.proxy import load_proxy
    from ragattn.rerank import Reranker

    if generator == "openai" and (not base_url or not model):
        raise _usage(
            "--generator openai needs --base-url (e.g. http://localhost:8000/v1) and --model"
        )
    loaded = load_proxy(
        proxy,
        device=settings.device,
        dtype=settings.dtype,
        threads=threads,
        cache_dir=settings.proxy_cache_dir,
    )
    reranker = (
        Reranker(loaded, method=settings.rerank_method)
        if rerank and settings.rerank_method
        else (Reranker(loaded) if rerank else None)
    )
    compressor = (
        Compressor(loaded, method=settings.compress_method)
        if compress and settings.compress_method
        else (Compressor(loaded) if compress else None)
    )
    gen: Any
    if generator == "openai":
        assert base_url is not None and model is not None
        gen = OpenAIChatGenerator(
            base_url, model, api_key=api_key, timeout=timeout, max_tokens=max_tokens
        )
    else:
        gen = LocalGenerator(loaded, max_new_tokens=max_tokens)
    return RAGPipeline(
        index,
        generator=gen,
        reranker=reranker,
        compressor=compressor,
        cache=MemoryCache(),
        tokenizer=loaded,
    )


def _show(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]question:[/] {result.question}", highlight=False)
    console.print(f"[bold green]answer:[/] {result.answer.text}", highlight=False)
    ranked = f"ranked by {result.ranked_by}" if result.ranked_by else "first-stage order"
    table = Table(title=f"sources ({result.flow}, {ranked}; context order: {result.order})")
    for col in ("ctx", "id", "title", "retrieval", "relevance", "kept sentences"):
        table.add_column(col)
    for s in result.sources:
        table.add_row(
            "-" if s.context_position is None else str(s.context_position),
            s.id,
            s.title or "",
            f"{s.retrieval_score:.4f} (#{s.retrieval_rank})",
            "-" if s.relevance_score is None else f"{s.relevance_score:.3f}",
            str(len(s.kept_spans)),
        )
    console.print(table)
    t = result.timings
    console.print(
        f"context tokens {result.tokens_before} -> {result.tokens_after} "
        f"(ratio {result.ratio:.2f}, {result.tokenizer}); "
        f"answer {result.answer.prompt_tokens} prompt + {result.answer.completion_tokens} "
        f"completion tokens by {result.answer.model}",
        highlight=False,
    )
    console.print(
        f"seconds: retrieve {t.retrieve:.2f}, "
        + (
            f"read {t.read:.2f} (rank and prune), "
            if result.flow == "one_read"
            else f"rerank {t.rerank:.2f}, compress {t.compress:.2f}, "
        )
        + f"cache {t.cache:.3f}, generate {t.generate:.2f}, total {t.total:.2f}"
        + (" (cache hit)" if result.cache_hit else ""),
        highlight=False,
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)


__all__ = ["ask"]
