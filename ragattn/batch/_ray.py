"""The Ray Data side: the actor that holds one loaded model, its Arrow output schema, Ray start-up.

Imported only when a Ray path runs (``ray`` and ``pyarrow`` come with ``ragattn[batch]``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ragattn._optional import require
from ragattn.batch._rows import OUTCOME, RESULT_COLUMNS, BatchTask, RowProcessor
from ragattn.errors import InvalidInputError

if TYPE_CHECKING:
    import pyarrow  # type: ignore[import-untyped]
    import ray.data

logger = logging.getLogger(__name__)


def _schema() -> dict[str, Any]:
    """The Arrow type of every column a task adds; fixed, so blocks of every worker concatenate
    (an inferred ``list<null>`` of an empty warnings list would not)."""
    pa = require("pyarrow", extra="batch")
    result = pa.struct(
        [("index", pa.int64()), ("relevance_score", pa.float64()), ("raw_score", pa.float64())]
    )
    span = pa.struct(
        [
            ("doc_index", pa.int64()),
            ("start", pa.int64()),
            ("end", pa.int64()),
            ("score", pa.float64()),
            ("text", pa.string()),
        ]
    )
    document = pa.struct(
        [
            ("index", pa.int64()),
            ("text", pa.string()),
            ("kept_spans", pa.list_(span)),
            ("sentence_scores", pa.list_(pa.float64())),
        ]
    )
    compression = pa.struct(
        [
            ("compressed_text", pa.string()),
            ("documents", pa.list_(document)),
            ("origin_tokens", pa.int64()),
            ("compressed_tokens", pa.int64()),
            ("ratio", pa.float64()),
            ("tokenizer", pa.string()),
            ("method", pa.string()),
            ("warnings", pa.list_(pa.string())),
        ]
    )
    return {
        "status": pa.string(),
        "error_type": pa.string(),
        "error": pa.string(),
        "results": pa.list_(result),
        "warnings": pa.list_(pa.string()),
        "compression": compression,
    }


class RowWorker:
    """A Ray Data actor: loads the proxy once in ``__init__`` and runs every batch it is given.

    A batch is a ``pyarrow.Table``; the output is the same table (same rows, same order) with the
    outcome columns and the task's result columns appended (replacing columns of the same name).
    """

    def __init__(self, task: BatchTask, skip_ids: Collection[str] = ()) -> None:
        self.processor = RowProcessor(task, skip_ids)
        self.columns = (*OUTCOME, *RESULT_COLUMNS[task.kind])
        self.types = _schema()

    def __call__(self, batch: pyarrow.Table) -> pyarrow.Table:
        pa = require("pyarrow", extra="batch")
        outcomes = [self.processor.process(row) for row in batch.to_pylist()]
        table = batch.drop_columns([c for c in self.columns if c in batch.column_names])
        for name in self.columns:
            values = [o.get(name) for o in outcomes]
            table = table.append_column(name, pa.array(values, type=self.types[name]))
        return table


def default_threads(workers: int) -> int:
    """Torch threads per worker: the smallest live node's CPUs less one for Ray Data's reading
    tasks, shared by ``workers`` actors, at least 1."""
    ray = require("ray", extra="batch")
    cpus = [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
    per_node = int(min(cpus)) if cpus else os.cpu_count() or 1
    return max(1, (per_node - 1) // workers)


def map_task(
    ds: ray.data.Dataset,
    task: BatchTask,
    *,
    workers: int,
    batch_size: int,
    skip_ids: Collection[str] = (),
    preserve_order: bool = True,
) -> ray.data.Dataset:
    """``ds.map_batches`` with a fixed pool of ``workers`` :class:`RowWorker` actors.

    Each actor reserves ``task.threads`` logical CPUs (resolved by :func:`default_threads` when
    None) and runs torch with that many threads.
    """
    require("ray", extra="batch")
    import ray
    import ray.data

    if workers < 1:
        raise InvalidInputError(f"workers must be >= 1 on Ray, got {workers}")
    if batch_size < 1:
        raise InvalidInputError(f"batch_size must be >= 1, got {batch_size}")
    if not ray.is_initialized():
        ray.init()  # what Ray Data does on first use; the CPU count is needed before that
    threads = task.threads or default_threads(workers)
    task = dataclasses.replace(task, threads=threads)
    total = ray.cluster_resources().get("CPU", 0.0)
    if workers * threads > total - 1:
        logger.warning(
            "%d workers x %d threads reserve %d of the cluster's %g CPUs, leaving less than one "
            "for reading: reads may wait forever; use fewer workers or threads",
            workers,
            threads,
            workers * threads,
            total,
        )
    if preserve_order:
        # The dataset's own context (shared with the datasets derived from it): rows come out in
        # input order even when two actors finish out of turn.
        ds.context.execution_options.preserve_order = True
    return ds.map_batches(
        RowWorker,
        fn_constructor_kwargs={"task": task, "skip_ids": frozenset(skip_ids)},
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=threads,
        udf_modifying_row_count=False,
    )


def init_ray(*, address: str | None, cpus: int, quiet: bool) -> bool:
    """Start Ray on this machine with ``cpus`` logical CPUs, or connect to ``address``.

    Returns True when this call started or connected (the caller shuts Ray down), False when Ray
    was already initialised by the caller's own code.
    """
    ray = require("ray", extra="batch")
    if quiet:
        import ray.data  # configures Ray Data's loggers on import; lower them after that

        logging.getLogger("ray.data").setLevel(logging.WARNING)
    if ray.is_initialized():
        return False
    common: dict[str, Any] = {
        "ignore_reinit_error": True,
        "log_to_driver": not quiet,
        "logging_level": logging.WARNING if quiet else logging.INFO,
    }
    if address:
        ray.init(address=address, **common)
    else:
        ray.init(num_cpus=cpus, include_dashboard=False, **common)
    return True


__all__ = ["RowWorker", "default_threads", "init_ray", "map_task"]
