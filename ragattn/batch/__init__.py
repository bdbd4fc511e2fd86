"""Batch reranking and compression of large query sets on Ray Data (``ragattn[batch]``).

Each function takes a :class:`ray.data.Dataset` of rows ``{id, query, documents}`` and returns a
dataset of the same rows, in the same order, with these columns added:

- ``status``: ``ok``, ``failed`` (``error_type`` and ``error`` say why: the library's
  ``error_type`` such as ``invalid_request``, or ``invalid_utf8`` / ``invalid_row``) or
  ``skipped`` (its id was in ``skip_ids``). A bad row never stops the job.
- ``results`` (rerank tasks): Cohere's shape, best first: ``index`` (input position),
  ``relevance_score`` in [0, 1], ``raw_score`` in the method's units; ``warnings``.
- ``compression`` (compress tasks): ``compressed_text``, per document its ``kept_spans``
  (``doc_index`` and character offsets ``[start, end)``), ``origin_tokens`` /
  ``compressed_tokens`` in ``tokenizer``'s tokens, ``ratio`` (fraction kept), ``warnings``.

The work runs in a fixed pool of ``workers`` Ray actors (``map_batches`` with a callable class),
each loading the proxy once, so the values are exactly those of :meth:`Reranker.rerank` /
:meth:`Compressor.compress` for the same row. Connect to a cluster with
``ray.init(address=...)`` first; without it a local Ray is started, as Ray Data itself would.
``ragattn batch`` (:mod:`.command`) runs the same over files, resumably. ``import ragattn`` never
imports Ray.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from ragattn.batch._rows import TASKS, BatchTask, TaskKind
from ragattn.batch.io import BatchSummary
from ragattn.batch.job import run_batch

if TYPE_CHECKING:
    import ray.data


def _run(
    ds: ray.data.Dataset,
    task: BatchTask,
    workers: int,
    batch_size: int,
    skip_ids: Collection[str],
    preserve_order: bool,
) -> ray.data.Dataset:
    from ragattn.batch._ray import map_task

    return map_task(
        ds,
        task,
        workers=workers,
        batch_size=batch_size,
        skip_ids=skip_ids,
        preserve_order=preserve_order,
    )


def rerank_dataset(
    ds: ray.data.Dataset,
    *,
    proxy: str | None = None,
    method: str | None = None,
    top_n: int | None = None,
    workers: int = 1,
    threads: int | None = None,
    batch_size: int = 8,
    skip_ids: Collection[str] = (),
    preserve_order: bool = True,
) -> ray.data.Dataset:
    """Rerank every row's documents for its query with :meth:`Reranker.rerank`.

    Args:
        ds: rows with ``id`` (string or integer), ``query`` and ``documents`` (strings or
            objects with ``text`` and optional ``id``/``title``).
        proxy: proxy name or path each worker loads (default: the library's).
        method: a rerank method (default: the library's best measured).
        top_n: keep the best ``top_n`` results per row (default: all).
        workers: Ray actors in the pool; each loads the proxy once.
        threads: torch threads per actor, also the logical CPUs it reserves (default: the
            smallest node's CPUs less one for reading, divided by ``workers``).
        batch_size: rows per actor call.
        skip_ids: ids to pass over (status ``skipped``), e.g. those a previous run finished.
        preserve_order: set ``preserve_order`` on ``ds.context`` so rows keep input order.

    Returns:
        The rows with ``status``, ``error_type``, ``error``, ``results`` and ``warnings`` added.

    Raises:
        InvalidInputError: an unknown method or a bad ``top_n``, before anything runs.
        MissingDependencyError: Ray is not installed.
    """
    task = BatchTask(kind="rerank", proxy=proxy, method=method, top_n=top_n, threads=threads)
    return _run(ds, task, workers, batch_size, skip_ids, preserve_order)


def compress_dataset(
    ds: ray.data.Dataset,
    *,
    ratio: float | None = None,
    target_tokens: int | None = None,
    threshold: float | None = None,
    proxy: str | None = None,
    method: str | None = None,
    workers: int = 1,
    threads: int | None = None,
    batch_size: int = 8,
    skip_ids: Collection[str] = (),
    preserve_order: bool = True,
) -> ray.data.Dataset:
    """Compress every row's documents for its query with :meth:`Compressor.compress`.

    Exactly one budget: ``ratio`` (fraction of tokens kept, in (0, 1]), ``target_tokens`` or
    ``threshold`` (lowest keep score kept, in [0, 1]). The other arguments are those of
    :func:`rerank_dataset`.

    Returns:
        The rows with ``status``, ``error_type``, ``error`` and ``compression`` added.
    """
    task = BatchTask(
        kind="compress",
        proxy=proxy,
        method=method,
        ratio=ratio,
        target_tokens=target_tokens,
        threshold=threshold,
        threads=threads,
    )
    return _run(ds, task, workers, batch_size, skip_ids, preserve_order)


def rerank_compress_dataset(
    ds: ray.data.Dataset,
    *,
    ratio: float | None = None,
    target_tokens: int | None = None,
    threshold: float | None = None,
    top_n: int | None = None,
    proxy: str | None = None,
    method: str | None = None,
    workers: int = 1,
    threads: int | None = None,
    batch_size: int = 8,
    skip_ids: Collection[str] = (),
    preserve_order: bool = True,
) -> ray.data.Dataset:
    """Rank and compress every row from one scoring pass with
    :meth:`Compressor.rerank_and_compress` (``method`` is a compress method).

    Returns:
        The rows with ``status``, ``error_type``, ``error``, ``results``, ``warnings`` and
        ``compression`` (the best ``top_n`` documents, in rank order, input indices) added.
    """
    task = BatchTask(
        kind="rerank-compress",
        proxy=proxy,
        method=method,
        top_n=top_n,
        ratio=ratio,
        target_tokens=target_tokens,
        threshold=threshold,
        threads=threads,
    )
    return _run(ds, task, workers, batch_size, skip_ids, preserve_order)


__all__ = [
    "TASKS",
    "BatchSummary",
    "BatchTask",
    "TaskKind",
    "compress_dataset",
    "rerank_compress_dataset",
    "rerank_dataset",
    "run_batch",
]
