"""ragattn batch rerank|compress|rerank-compress: a file-to-file job on Ray Data (an edge).

Builds a :class:`BatchTask` from the options, runs :func:`run_batch` and prints its one-line
summary. Exit codes: 0 every row written or skipped, 1 some rows failed (see the errors file),
2 the job could not start (bad options, no inputs, Ray missing).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ragattn.batch._rows import BatchTask, TaskKind, keywords_not_taken
from ragattn.batch.io import BatchSummary
from ragattn.batch.job import run_batch
from ragattn.errors import RagattnError

batch_app = typer.Typer(
    help=(
        "Rerank or compress every row of JSONL/Parquet files on Ray Data: an actor pool loads the "
        "proxy once per worker; local by default, a cluster with --ray-address or RAY_ADDRESS. "
        "Rows are {id, query, documents}; rows already in OUT are skipped (resumable)."
    ),
    no_args_is_help=True,
)

INPUT = typer.Option(..., "--input", "-i", help="A JSONL or Parquet file, a folder, or a glob.")
OUTPUT = typer.Option(..., "--output", "-o", help="OUT (JSONL); ids already there are skipped.")
ERRORS = typer.Option(None, "--errors", help="Errors file (default: <OUT stem>.errors.jsonl).")
METHOD = typer.Option(
    None, "--method", help="Scoring method (default: the library's best); an unknown one lists all."
)
PROXY = typer.Option(None, "--proxy", help="Proxy name or path (default: the packaged one).")
WORKERS = typer.Option(
    1, "--workers", min=0, help="Ray actors, each loading the proxy once; 0: this process, no Ray."
)
THREADS = typer.Option(
    None, "--threads", min=1, help="Torch threads per worker (default: cores / workers)."
)
ADDRESS = typer.Option(
    None, "--ray-address", envvar="RAY_ADDRESS", help="A running Ray cluster (default: local)."
)
BATCH = typer.Option(8, "--batch-size", min=1, help="Rows per worker call.")
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress display.")
QUIET = typer.Option(False, "--quiet", help="Keep Ray's own logs off the console.")
TOP_N = typer.Option(None, "--top-n", min=1, help="Keep the best N documents (default: all).")
RATIO = typer.Option(
    None, "--ratio", help="Fraction of tokens to keep, in (0, 1] (no budget: 0.2, <= 1024 tokens)."
)
TARGET = typer.Option(None, "--target-tokens", min=1, help="Keep at most this many tokens.")
THRESHOLD = typer.Option(None, "--threshold", help="Keep sentences scoring at least this.")
MAX_TOKENS = typer.Option(
    None, "--max-tokens", min=1, help="With --ratio: keep at most this many tokens a row."
)
LANGUAGE = typer.Option(
    "auto",
    "--language",
    help="The documents' language for sentence splitting: an ISO 639-1 code (de, fr, ...; an "
    "unknown one lists them) or auto, by each text's script.",
)


def _job(
    kind: TaskKind,
    *,
    input: str,
    output: Path,
    errors: Path | None,
    workers: int,
    ray_address: str | None,
    batch_size: int,
    progress: bool,
    quiet: bool,
    **task_args: object,
) -> None:
    from ragattn.cli._settings import cli_settings

    models_dir = cli_settings().models_dir  # a Ray worker is another process: the task carries it
    try:
        task = BatchTask(kind=kind, models_dir=models_dir, **task_args)  # type: ignore[arg-type]
        if workers == 0 and progress:
            summary = _run_with_bar(task, input, output, errors)
        else:
            summary = run_batch(
                task,
                input,
                output,
                errors=errors,
                workers=workers,
                ray_address=ray_address,
                batch_size=batch_size,
                progress=progress,
                quiet=quiet,
            )
    except (RagattnError, ImportError) as exc:  # MissingDependencyError is an ImportError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(summary.line())
    if summary.failed:
        raise typer.Exit(code=1)


def _run_with_bar(task: BatchTask, input: str, output: Path, errors: Path | None) -> BatchSummary:
    """The in-process fallback with a rich progress display (rows done, rows/s)."""
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), "{task.description}", MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        rows = bar.add_task(f"{task.kind} rows", total=None)
        return run_batch(
            task, input, output, errors=errors, workers=0, on_row=lambda: bar.advance(rows)
        )


OPTIONS: dict[str, tuple[Any, Any]] = {
    "input": (str, INPUT),
    "output": (Path, OUTPUT),
    "errors": (Path | None, ERRORS),
    "ratio": (float | None, RATIO),
    "target_tokens": (int | None, TARGET),
    "threshold": (float | None, THRESHOLD),
    "max_tokens": (int | None, MAX_TOKENS),
    "language": (str, LANGUAGE),
    "top_n": (int | None, TOP_N),
    "method": (str | None, METHOD),
    "proxy": (str | None, PROXY),
    "workers": (int, WORKERS),
    "threads": (int | None, THREADS),
    "ray_address": (str | None, ADDRESS),
    "batch_size": (int, BATCH),
    "progress": (bool, PROGRESS),
    "quiet": (bool, QUIET),
}
"""Every option of the batch commands: its type and its typer option, in ``--help`` order."""


def _options(kind: TaskKind) -> list[str]:
    """The options of one command: the verb's own arguments (a budget and ``language`` to
    compress, ``top_n`` to rank: :func:`~ragattn.contract.verb_keywords`) and the job's."""
    verb_only = keywords_not_taken(kind)
    names = [n for n in OPTIONS if n not in verb_only]
    if kind == "rerank":  # --method before --top-n, as the rerank command has always listed them
        names.remove("method")
        names.insert(names.index("top_n"), "method")
    return names


def _command(kind: TaskKind, help: str) -> Callable[..., None]:
    """The typer command of ``kind``: its signature built from :func:`_options`."""

    def command(**options: Any) -> None:
        _job(kind, **options)

    names = _options(kind)
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=OPTIONS[n][1]) for n in names]
    )
    command.__annotations__ = {n: OPTIONS[n][0] for n in names} | {"return": None}
    command.__doc__ = help
    command.__name__ = command.__qualname__ = kind.replace("-", "_")
    return command


rerank = batch_app.command("rerank")(
    _command(
        "rerank", "Rerank each row's documents: OUT rows gain Cohere-shaped results and warnings."
    )
)
compress = batch_app.command("compress")(
    _command(
        "compress", "Compress each row's documents under one budget: OUT rows gain compression."
    )
)
rerank_compress = batch_app.command("rerank-compress")(
    _command(
        "rerank-compress",
        "Rank and compress from one scoring pass (a compress method): OUT rows gain results,\n"
        "warnings and compression of the best --top-n documents.",
    )
)


__all__ = ["batch_app"]
