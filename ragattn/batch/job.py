"""A file-to-file batch job: inputs -> Ray Data actor pool (or this process) -> OUT + errors."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

from ragattn.batch._rows import BatchTask, RowProcessor
from ragattn.batch.io import (
    BatchSummary,
    InputFormat,
    ResultWriter,
    errors_path_for,
    iter_local,
    load_done,
    read_dataset,
    resolve_inputs,
)
from ragattn.errors import InvalidInputError


def local_threads(workers: int) -> int:
    """Torch threads per worker on this machine: its cores shared by the workers, at least 1."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def run_batch(
    task: BatchTask,
    input: str | Path,
    output: str | Path,
    *,
    errors: str | Path | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    batch_size: int = 8,
    progress: bool = True,
    quiet: bool = False,
    on_row: Callable[[], None] | None = None,
) -> BatchSummary:
    """Run ``task`` over every row of ``input`` and append the results to ``output``.

    Args:
        task: what to run (its ``threads`` default: this machine's cores / ``workers`` locally,
            the nodes' CPUs less one / ``workers`` on a cluster).
        input: a JSONL or Parquet file, a folder of them, or a glob.
        output: OUT, a JSONL file; rows whose id is already there are skipped.
        errors: the errors file (default: ``<OUT stem>.errors.jsonl`` beside OUT).
        workers: Ray actors, each loading the proxy once; ``0`` runs in this process, no Ray.
        ray_address: a running cluster (``ray://...`` or ``auto``); None: a local Ray with
            ``workers * threads + 1`` CPUs (one for the reading tasks). The library never reads
            ``RAY_ADDRESS``: ``ragattn batch`` passes it as ``--ray-address``'s default, and a
            caller with it set passes it here (Ray refuses a local start while it is set).
        batch_size: rows per actor call, and per block of the dataset.
        progress: Ray Data's progress bars (Ray path).
        quiet: keep Ray's own logs off the console.
        on_row: called after every row in the in-process path (a progress bar).

    Returns:
        The counts; ``rows_in == skipped + written + failed``.

    Raises:
        InvalidInputError: no inputs, OUT among the inputs, a foreign OUT, ``workers < 0``.
        MissingDependencyError: ``workers >= 1`` without ``ragattn[batch]``.
    """
    if workers < 0:
        raise InvalidInputError(f"workers must be >= 0 (0: in this process), got {workers}")
    files, fmt = resolve_inputs(input)
    out = Path(output).expanduser()
    err = Path(errors).expanduser() if errors is not None else errors_path_for(out)
    resolved = {f.resolve() for f in files}
    if out.resolve() in resolved or err.resolve() in resolved:
        raise InvalidInputError("the output or errors file is one of the inputs; write elsewhere")
    if out.resolve() == err.resolve():
        raise InvalidInputError("the output and errors files must differ")
    done = load_done(out)
    writer = ResultWriter(task.kind, out, err, done)
    started = time.perf_counter()
    try:
        if workers == 0:
            _run_local(task, files, fmt, writer, done, on_row)
        else:
            _run_ray(
                task,
                files,
                fmt,
                writer,
                done,
                workers=workers,
                address=ray_address,
                batch_size=batch_size,
                progress=progress,
                quiet=quiet,
            )
    finally:
        writer.flush()
        writer.close()
    seconds = time.perf_counter() - started
    writer.check()
    return BatchSummary(
        task=task.kind,
        rows_in=writer.rows_in,
        skipped=writer.skipped,
        written=writer.written,
        failed=writer.failed,
        seconds=seconds,
        output=out,
        errors=err,
    )


def _run_local(
    task: BatchTask,
    files: list[Path],
    fmt: InputFormat,
    writer: ResultWriter,
    done: set[str],
    on_row: Callable[[], None] | None,
) -> None:
    processor = RowProcessor(task, done)
    for row in iter_local(files, fmt):
        writer.write({**row, **processor.process(row)})
        writer.flush()
        if on_row is not None:
            on_row()


def _run_ray(
    task: BatchTask,
    files: list[Path],
    fmt: InputFormat,
    writer: ResultWriter,
    done: set[str],
    *,
    workers: int,
    address: str | None,
    batch_size: int,
    progress: bool,
    quiet: bool,
) -> None:
    from ragattn.batch._ray import init_ray, map_task

    address = address or None
    if task.threads is None and address is None:
        task = dataclasses.replace(task, threads=local_threads(workers))
    cpus = workers * (task.threads or 1) + 1
    owned = init_ray(address=address, cpus=cpus, quiet=quiet)
    try:
        ds = read_dataset(files, fmt, rows_per_block=batch_size)
        ds.context.enable_progress_bars = progress
        ds = map_task(ds, task, workers=workers, batch_size=batch_size, skip_ids=done)
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            for row in batch.to_pylist():  # type: ignore[union-attr]
                writer.write(row)
            writer.flush()
    finally:
        if owned:
            import ray

            ray.shutdown()


__all__ = ["local_threads", "run_batch"]
