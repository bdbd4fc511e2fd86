"""``ragattn ask``: answer a question end to end over a built index (retrieve, one read that ranks
and prunes the candidates, generate; or ``--flow two_pass``: rerank, keep the best, compress) and
show the answer, its sources with scores, the compression and per-stage timings.

Heavy imports happen inside the command so that ``ragattn --help`` stays fast. The engines, the
cache and the generator are built by the composition root the service uses too
(:mod:`ragattn.composition`) from the same ``RAGATTN_*`` settings; an option given on the command
line overrides its setting for this run (:func:`ask_settings`). The rerank and compress methods come
from ``RAGATTN_RERANK_METHOD`` / ``RAGATTN_COMPRESS_METHOD``; ``ask --help`` lists them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragattn.cli._settings import cli_settings

if TYPE_CHECKING:
    from ragattn.pipeline import RAGPipeline
    from ragattn.settings import Settings

_GENERATORS = ("local", "openai")


_INDEX = typer.Option(
    help="index directory written by 'ragattn index build' (default RAGATTN_INDEX_DIR)"
)
_FLOW = typer.Option(
    help="one_read: one proxy read of every candidate ranks them and keeps their best "
    "sentences; two_pass: rerank, keep --top-n, compress those (default: one_read, or "
    "two_pass with --no-rerank or --no-compress)"
)
_TOP_K = typer.Option(min=1, help="passages retrieved from the index")
_TOP_N = typer.Option(min=1, help="passages kept after ranking (default: all for one_read, 5)")
_RATIO = typer.Option(
    min=0.0,
    max=1.0,
    help="fraction of context tokens kept (default: 0.2 for one_read, 0.5 for two_pass)",
)
_MAX_CONTEXT_TOKENS = typer.Option(
    min=1,
    help="most context tokens kept whatever the ratio gives (default: 1024 with the default "
    "ratio, none with --ratio)",
)
_ORDER = typer.Option(help="context order: best_first, best_last or edges (default: measured)")
_MODE = typer.Option(help="search mode: hybrid, bm25 or dense")
_RERANK = typer.Option("--rerank/--no-rerank", help="rerank the hits")
_COMPRESS = typer.Option("--compress/--no-compress", help="compress the passages")
_LANGUAGE = typer.Option(
    help="the passages' language for sentence splitting: an ISO 639-1 code (de, fr, es, ...; "
    "an unknown one lists them) or auto, by each passage's script"
)
_GENERATOR = typer.Option(
    help="local (the proxy) or openai (default when RAGATTN_GENERATOR_BASE_URL is set)"
)
_BASE_URL = typer.Option(
    help="OpenAI-compatible API root incl. /v1 (default RAGATTN_GENERATOR_BASE_URL)"
)
_MODEL = typer.Option(help="model sent to the endpoint (default RAGATTN_GENERATOR_MODEL)")
_API_KEY_ENV = typer.Option(
    help="environment variable holding the endpoint's API key (default: "
    "RAGATTN_GENERATOR_API_KEY, else OPENAI_API_KEY)"
)
_MAX_TOKENS = typer.Option(
    min=1, help="most tokens generated (default RAGATTN_GENERATOR_MAX_TOKENS, 48)"
)
_TIMEOUT = typer.Option(
    help="seconds per generator request (default RAGATTN_REQUEST_TIMEOUT_S, 120)"
)
_PROXY = typer.Option(help="proxy model (default: RAGATTN_PROXY or smollm2-135m)")
_THREADS = typer.Option(help="torch threads (default: RAGATTN_THREADS)")


def ask(
    question: Annotated[str, typer.Argument(help="the question to answer")],
    index: Annotated[Path | None, _INDEX] = None,
    flow: Annotated[str | None, _FLOW] = None,
    top_k: Annotated[int, _TOP_K] = 20,
    top_n: Annotated[int | None, _TOP_N] = None,
    ratio: Annotated[float | None, _RATIO] = None,
    max_context_tokens: Annotated[int | None, _MAX_CONTEXT_TOKENS] = None,
    order: Annotated[str | None, _ORDER] = None,
    mode: Annotated[str, _MODE] = "hybrid",
    rerank: Annotated[bool, _RERANK] = True,
    compress: Annotated[bool, _COMPRESS] = True,
    language: Annotated[str, _LANGUAGE] = "auto",
    generator: Annotated[str | None, _GENERATOR] = None,
    base_url: Annotated[str | None, _BASE_URL] = None,
    model: Annotated[str | None, _MODEL] = None,
    api_key_env: Annotated[str | None, _API_KEY_ENV] = None,
    max_tokens: Annotated[int | None, _MAX_TOKENS] = None,
    timeout: Annotated[float | None, _TIMEOUT] = None,
    proxy: Annotated[str | None, _PROXY] = None,
    threads: Annotated[int | None, _THREADS] = None,
) -> None:
    """Answer QUESTION from an index: retrieve, read the candidates once (rank and prune), generate.

    The methods are RAGATTN_RERANK_METHOD and RAGATTN_COMPRESS_METHOD, one of those listed below.
    """
    from ragattn.errors import RagattnError
    from ragattn.pipeline import DEFAULT_ORDER, FLOWS, PipelineOptions

    try:
        if flow is not None and flow not in FLOWS:
            raise _usage(f"--flow must be one of {', '.join(FLOWS)}, got {flow!r}")
        options = PipelineOptions(
            flow=flow,  # type: ignore[arg-type]
            top_k=top_k,
            top_n=top_n,
            ratio=ratio,
            max_context_tokens=max_context_tokens,
            order=(order or DEFAULT_ORDER),  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            rerank=rerank,
            compress=compress,
            language=language,
        )
        settings = ask_settings(
            cli_settings(),
            index=index,
            generator=generator,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            max_tokens=max_tokens,
            timeout=timeout,
            proxy=proxy,
            threads=threads,
        )
        pipeline = build_ask_pipeline(settings, rerank=rerank, compress=compress)
        result = pipeline.ask(question, options)
    except RagattnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    _show(result)


def _usage(message: str) -> Exception:
    from ragattn.errors import InvalidInputError

    return InvalidInputError(message)


def ask_settings(
    settings: Settings,
    *,
    index: Path | None = None,
    generator: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
    proxy: str | None = None,
    threads: int | None = None,
) -> Settings:
    """``settings`` (``RAGATTN_*``) with the command's options applied: an option given wins,
    an option left out keeps the setting, so ``ragattn ask`` and the service read one
    configuration.

    Raises:
        InvalidInputError: an unknown ``--generator``, or ``openai`` without an endpoint and model.
    """
    import os

    chosen = generator or ("openai" if settings.generator_base_url else "local")
    if chosen not in _GENERATORS:
        raise _usage(f"--generator must be one of {', '.join(_GENERATORS)}, got {chosen!r}")
    base_url = base_url or settings.generator_base_url
    model = model or settings.generator_model
    if chosen == "openai" and (not base_url or not model):
        raise _usage(
            "--generator openai needs --base-url (e.g. http://localhost:8000/v1) and --model"
        )
    # This edge reads the key's variable: the library never reads the environment.
    if api_key_env:
        api_key = os.environ.get(api_key_env) or settings.generator_api_key
    else:
        api_key = settings.generator_api_key or os.environ.get("OPENAI_API_KEY")
    return dataclasses.replace(
        settings,
        index_dir=str(index) if index is not None else settings.index_dir,
        generator_base_url=base_url if chosen == "openai" else None,
        generator_model=model if chosen == "openai" else None,
        generator_api_key=api_key,
        generator_max_tokens=max_tokens or settings.generator_max_tokens,
        request_timeout_s=timeout if timeout is not None else settings.request_timeout_s,
        proxy=proxy or settings.proxy,
        threads=threads if threads is not None else settings.threads,
    )


def build_ask_pipeline(settings: Settings, *, rerank: bool, compress: bool) -> RAGPipeline:
    """The pipeline of ``ragattn ask`` from the one composition root (:mod:`ragattn.composition`),
    as the service builds its own: the index at ``index_dir``, the engines, the cache and the
    generator of ``settings``, the question and passages held to its token limits.

    Raises:
        InvalidInputError: no index (the message says how to build one).
        ModelLoadError: the proxy or a compress method cannot be loaded.
    """
    from ragattn.composition import build_cache, build_engines, build_pipeline
    from ragattn.errors import ModelLoadError
    from ragattn.limits import Limits
    from ragattn.pipeline import load_index

    index = load_index(settings.index_dir)
    engines = build_engines(settings, rerank=rerank, compress=compress)
    if compress and engines.compressor is None:
        raise ModelLoadError(
            f"{engines.compressor_unavailable}; run with --no-compress to answer without it"
        )
    return build_pipeline(
        engines, index, cache=build_cache(settings), limits=Limits.from_settings(settings)
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


__all__ = ["ask", "ask_settings", "build_ask_pipeline"]
