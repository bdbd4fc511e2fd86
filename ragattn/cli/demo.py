"""``ragattn demo`` and ``ragattn version``: the built-in example and the package version.

The demo shows the product's main flow on its own six passages: one read of every candidate by
the packaged proxy ranks them and keeps their best sentences under a budget (the context that goes
to the generator), and beside it what a pipeline that reranks and pastes the best passages
("rerank and stuff") would send with exactly as many tokens. The read's seconds are a warm call's,
stage by stage (:mod:`ragattn.compress.read`); loading, the first call's included, is reported
apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ragattn.types import CompressionResult, RerankResults

DEMO_RATIO = 0.3
"""The demo's budget: 30 % of the six passages' tokens (the demo's default since its first
release, kept as it was when the flow changed, not tuned to the example)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoScreen:
    """What ``ragattn demo`` shows.

    Attributes:
        ranked: the one read's ranking of every passage (best first).
        context: the one read's compression: the context for the generator; its
            ``stage_seconds`` say where the read's time went.
        load_s: wall seconds to make the compressor and its first, cold read (what loads on first
            use: the document probe, the selection, the MiniLM encoder); the proxy's own loading
            is ``proxy.load_seconds``.
        read_s: wall seconds of the read shown, a warm one (the same answer as the cold one).
        stuffed: the default reranker's best passages, whole sentences (a Markdown passage's
            whole structural units, joined as the read joins them:
            :func:`~ragattn.lab.evaluation.context.stuff`), cut at the context's token count
            (``context.compressed_tokens``, in the proxy's tokenizer; fences and table headers a
            Markdown passage repeats are counted).
        stuffed_ids: the passages ``stuffed`` touches, in its order.
        stuffed_tokens: its length in the proxy's tokens (never more than the context's).
        rerank_method: the reranker that ordered ``stuffed``.
    """

    ranked: RerankResults
    context: CompressionResult
    load_s: float
    read_s: float
    stuffed: str
    stuffed_ids: tuple[str, ...]
    stuffed_tokens: int
    rerank_method: str


def demo_screen(proxy: Any, ratio: float = DEMO_RATIO) -> DemoScreen:
    """One read of the demo's passages at ``ratio``, and rerank-and-stuff at the same tokens."""
    import time

    from ragattn.compress import Compressor
    from ragattn.demo import DOCUMENTS, QUERY
    from ragattn.lab.evaluation.context import ContextQuestion, n_tokens, stuff
    from ragattn.rerank import Reranker

    started = time.perf_counter()
    compressor = Compressor(proxy)
    compressor.rerank_and_compress(QUERY, DOCUMENTS, ratio=ratio)  # cold: loads on first use
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    ranked, context = compressor.rerank_and_compress(QUERY, DOCUMENTS, ratio=ratio)
    read_s = time.perf_counter() - started
    reranker = Reranker(proxy)
    order = [r.index for r in reranker.rerank(QUERY, DOCUMENTS)]
    question = ContextQuestion(
        qid="demo", query=QUERY, candidates=DOCUMENTS, gold=tuple(() for _ in DOCUMENTS)
    )
    kept = stuff(question, order, context.compressed_tokens, proxy.tokenizer)
    touched = dict.fromkeys(doc for doc, _, _ in kept.spans)
    return DemoScreen(
        ranked=ranked,
        context=context,
        load_s=load_s,
        read_s=read_s,
        stuffed=kept.text,
        stuffed_ids=tuple(str(DOCUMENTS[d].id) for d in touched),
        stuffed_tokens=n_tokens(proxy.tokenizer, kept.text),
        rerank_method=reranker.method,
    )


def demo(
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    ratio: float = typer.Option(
        DEMO_RATIO, min=0.0, max=1.0, help="Fraction of the passages' tokens the context keeps."
    ),
) -> None:
    """Read a built-in question's six passages once with the packaged proxy: their ranking, the
    context for the generator, and rerank-and-stuff at the same tokens (no Redis, no index)."""
    from rich.console import Console
    from rich.table import Table

    from ragattn.demo import QUERY
    from ragattn.proxy import load_proxy

    console = Console()
    loaded = load_proxy(proxy)
    console.print(f"proxy [bold]{loaded.name}[/] loaded in {loaded.load_seconds:.1f} s")
    console.print(f"question: [bold]{QUERY}[/]")
    screen = demo_screen(loaded, ratio)
    console.print(
        f"compressor ready in {screen.load_s:.1f} s (its first read included: the probes and "
        "the MiniLM encoder load on first use)"
    )
    out = screen.context
    kept = {d.index: d for d in out.documents}
    table = Table(
        title=f"one read: the candidates ranked ({screen.ranked.method}, "
        f"{screen.read_s:.2f} s warm, ranking and pruning from one forward)"
    )
    for col in ("rank", "input index", "id", "relevance_score", "sentences kept"):
        table.add_column(col)
    for rank, res in enumerate(screen.ranked, start=1):
        doc = kept[res.index]
        table.add_row(
            str(rank),
            str(res.index),
            str(res.document.id),
            f"{res.relevance_score:.3f}",
            f"{len(doc.kept_spans)} of {len(doc.sentence_spans)}",
        )
    console.print(table)
    console.print(f"where the read's {screen.read_s:.3f} s went: {stage_line(out)}")
    console.print(
        f"[bold]the context for the generator[/] ({out.compressed_tokens} of {out.origin_tokens} "
        f"tokens, ratio {ratio:g}, counted with {out.tokenizer}):"
    )
    console.print(out.compressed_text, markup=False)
    console.print(
        f"\n[bold]rerank and stuff[/] ({screen.rerank_method} order, whole sentences of the best "
        f"passages, the same {out.compressed_tokens} tokens: {screen.stuffed_tokens} used; "
        f"passages {', '.join(screen.stuffed_ids)}):"
    )
    console.print(screen.stuffed, markup=False)
    for warning in (*screen.ranked.warnings, *out.warnings):
        console.print(f"[yellow]warning:[/] {warning}")


def stage_line(result: CompressionResult) -> str:
    """A result's stage seconds on one line: ``sentences 0.001 s, cut 0.000 s, ...``."""
    return ", ".join(f"{name} {seconds:.3f} s" for name, seconds in result.stage_seconds)


def version() -> None:
    """Print the ragattn version."""
    from ragattn._version import __version__

    typer.echo(__version__)


__all__ = ["DEMO_RATIO", "DemoScreen", "demo", "demo_screen", "stage_line", "version"]
