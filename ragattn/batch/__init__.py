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

import inspect
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ragattn.batch._rows import TASKS, BatchTask, TaskKind, keywords_not_taken
from ragattn.batch.io import BatchSummary
from ragattn.batch.job import run_batch
from ragattn.languages import AUTO

if TYPE_CHECKING:
    import ray.data


def map_dataset(
    ds: ray.data.Dataset,
    kind: TaskKind,
    *,
    ratio: float | None = None,
    target_tokens: int | None = None,
    threshold: float | None = None,
    max_tokens: int | None = None,
    language: str = AUTO,
    top_n: int | None = None,
    proxy: str | None = None,
    method: str | None = None,
    workers: int = 1,
    threads: int | None = None,
    batch_size: int = 8,
    skip_ids: Collection[str] = (),
    preserve_order: bool = True,
) -> ray.data.Dataset:
    """Run the task ``kind`` on every row: what :func:`rerank_dataset`, :func:`compress_dataset`
    and :func:`rerank_compress_dataset` are for one kind each.

    Args:
        ds: rows with ``id`` (string or integer), ``query`` and ``documents`` (strings or
            objects with ``text`` and optional ``id``/``title``).
        kind: ``rerank``, ``compress`` or ``rerank-compress``.
        ratio, target_tokens, threshold: at most one budget for the compress tasks: ``ratio``
            (fraction of tokens kept, in (0, 1]), ``target_tokens`` or ``threshold`` (lowest keep
            score kept, in [0, 1]); none: :data:`~ragattn.types.DEFAULT_BUDGET`.
        max_tokens: with ``ratio``, the most tokens a row keeps (a ceiling on the ratio).
        language: the documents' language for sentence splitting (the compress tasks): an ISO
            639-1 code, or ``"auto"`` (by each text's script).
        top_n: keep the best ``top_n`` results per row (the rerank tasks; default: all).
        proxy: proxy name or path each worker loads (default: the library's).
        method: a rerank method for ``rerank``, a compress method otherwise (default: the
            library's best measured).
        workers: Ray actors in the pool; each loads the proxy once.
        threads: torch threads per actor, also the logical CPUs it reserves (default: the
            smallest node's CPUs less one for reading, divided by ``workers``).
        batch_size: rows per actor call.
        skip_ids: ids to pass over (status ``skipped``), e.g. those a previous run finished.
        preserve_order: set ``preserve_order`` on ``ds.context`` so rows keep input order.

    Returns:
        The rows with ``status``, ``error_type`` and ``error`` added, and the task's result columns.

    Raises:
        InvalidInputError: an unknown method, a bad ``top_n`` or budget, before anything runs.
        MissingDependencyError: Ray is not installed.
    """
    from ragattn.batch._ray import map_task

    task = BatchTask(
        kind=kind,
        proxy=proxy,
        method=method,
        top_n=top_n,
        ratio=ratio,
        target_tokens=target_tokens,
        threshold=threshold,
        max_tokens=max_tokens,
        language=language,
        threads=threads,
    )
    return map_task(
        ds,
        task,
        workers=workers,
        batch_size=batch_size,
        skip_ids=skip_ids,
        preserve_order=preserve_order,
    )


def _task_function(kind: TaskKind, doc: str) -> Callable[..., ray.data.Dataset]:
    """:func:`map_dataset` for one ``kind``, taking only that task's own arguments
    (:func:`~ragattn.contract.verb_keywords`); another one is a TypeError, as for any function."""
    whole = inspect.signature(map_dataset)
    verb_only = keywords_not_taken(kind)
    signature = whole.replace(
        parameters=[
            p for name, p in whole.parameters.items() if name != "kind" and name not in verb_only
        ]
    )

    def run(*args: Any, **kwargs: Any) -> ray.data.Dataset:
        bound = signature.bind(*args, **kwargs).arguments
        return map_dataset(bound.pop("ds"), kind, **bound)

    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__name__ = run.__qualname__ = f"{kind.replace('-', '_')}_dataset"
    run.__doc__ = doc
    return run


rerank_dataset = _task_function(
    "rerank",
    """Rerank every row's documents for its query with :meth:`Reranker.rerank`.

    The arguments are those of :func:`map_dataset` less the budget.

    Returns:
        The rows with ``status``, ``error_type``, ``error``, ``results`` and ``warnings`` added.
    """,
)
compress_dataset = _task_function(
    "compress",
    """Compress every row's documents for its query with :meth:`Compressor.compress`.

    The arguments are those of :func:`map_dataset` less ``top_n``; at most one budget.

    Returns:
        The rows with ``status``, ``error_type``, ``error`` and ``compression`` added.
    """,
)
rerank_compress_dataset = _task_function(
    "rerank-compress",
    """Rank and compress every row from one scoring pass with
    :meth:`Compressor.rerank_and_compress` (``method`` is a compress method).

    The arguments are those of :func:`map_dataset`; at most one budget.

    Returns:
        The rows with ``status``, ``error_type``, ``error``, ``results``, ``warnings`` and
        ``compression`` (the best ``top_n`` documents, in rank order, input indices) added.
    """,
)


__all__ = [
    "TASKS",
    "BatchSummary",
    "BatchTask",
    "TaskKind",
    "compress_dataset",
    "map_dataset",
    "rerank_compress_dataset",
    "rerank_dataset",
    "run_batch",
]
