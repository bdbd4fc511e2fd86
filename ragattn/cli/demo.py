"""``ragattn demo`` and ``ragattn version``: the built-in example and the package version."""

from __future__ import annotations

import typer


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
    from ragattn.rerank import METHODS

    spec = METHODS[ranked.method]
    console.print(
        "[dim]input index: position in the input list; "
        f"{spec.score_scale} (method {spec.name!r}, the same on every route); "
        f"{'independent of' if spec.order_free else 'depends on'} the input order[/]"
    )
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


def version() -> None:
    """Print the ragattn version."""
    from ragattn._version import __version__

    typer.echo(__version__)


__all__ = ["demo", "version"]
