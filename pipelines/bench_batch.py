"""Batch throughput: Ray Data with 1 and 2 workers against the plain in-process loop, one run.

Rows are DL19-style: row ``k`` is query ``k mod 43`` of TREC DL 2019 with the 20 BM25 candidates
at ranks ``5 * (k div 43) + 1 ..`` (+20), so 500 rows are 500 distinct (query, top-20) lists. The
three systems run the same rows through the same task; the rows whose output (ranking, or
compressed text) equals the in-process loop's are counted:

- ``in-process``: ``for row: Reranker.rerank(...)`` (or ``Compressor.compress``) in this process,
  torch with every core;
- ``ray-1``: ``ragattn batch`` (``run_batch``), one actor with every core as torch threads;
- ``ray-2``: two actors, one thread each.

Each time includes loading the model (once per process or actor; one untimed row first warms the
imports and the page cache for all three); Ray's own start-up (``ray.init``) is timed apart and
excluded. rows/s and the ratio to the in-process loop are printed as a table
with ``torch.backends.cpu.get_cpu_capability()``.

    python pipelines/bench_batch.py --rows 500                 # the issue's benchmark
    python pipelines/bench_batch.py --rows 10 --task compress  # a smoke run
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ragattn.batch import BatchTask, run_batch
from ragattn.batch.job import local_threads

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019"


def make_rows(data: Path, rows: int, depth: int, step: int) -> list[dict[str, Any]]:
    """``rows`` (query, top-``depth``) lists from the BM25 top-100 candidates (see module doc)."""
    with (data / "candidates_bm25_top100.jsonl").open(encoding="utf-8") as fh:
        queries = [json.loads(line) for line in fh]
    out = []
    for k in range(rows):
        q = queries[k % len(queries)]
        start = step * (k // len(queries))
        cands = sorted(q["candidates"], key=lambda c: c["rank"])[start : start + depth]
        if len(cands) < depth:
            raise SystemExit(f"--rows {rows} needs more than the top-100 candidates per query")
        out.append(
            {
                "id": f"{q['qid']}@{start}",
                "query": q["query"],
                "documents": [{"text": c["text"], "id": c["docid"]} for c in cands],
            }
        )
    return out


def in_process(task: BatchTask, rows: list[dict[str, Any]]) -> tuple[float, list[Any]]:
    """The plain loop over the public classes; seconds including the model load, and results."""
    started = time.perf_counter()
    if task.kind == "rerank":
        from ragattn.rerank import Reranker

        reranker = Reranker(threads=os.cpu_count())
        results = [
            [r.index for r in reranker.rerank(row["query"], row["documents"], top_n=task.top_n)]
            for row in rows
        ]
    else:
        from ragattn.compress import Compressor

        compressor = Compressor(threads=os.cpu_count())
        results = [
            compressor.compress(row["query"], row["documents"], **task.budget).compressed_text
            for row in rows
        ]
    return time.perf_counter() - started, results


def on_ray(
    task: BatchTask, src: Path, out: Path, workers: int, batch_size: int
) -> tuple[float, list[Any]]:
    """``run_batch`` on the running local Ray; seconds (model loads included), and results."""
    out.unlink(missing_ok=True)
    summary = run_batch(
        task, src, out, workers=workers, batch_size=batch_size, progress=False, quiet=True
    )
    if summary.failed or summary.written != summary.rows_in:
        raise SystemExit(f"ray-{workers}: {summary.line()}")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    if task.kind == "rerank":
        return summary.seconds, [[r["index"] for r in row["results"]] for row in rows]
    return summary.seconds, [row["compression"]["compressed_text"] for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--depth", type=int, default=20, help="candidates per row")
    parser.add_argument("--step", type=int, default=5, help="rank offset between a query's rows")
    parser.add_argument("--task", choices=("rerank", "compress"), default="rerank")
    parser.add_argument("--ratio", type=float, default=0.5, help="compress budget")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    import ray

    cpus = os.cpu_count() or 1
    rows = make_rows(args.data, args.rows, args.depth, args.step)
    budget = {"ratio": args.ratio} if args.task == "compress" else {}
    with tempfile.TemporaryDirectory(prefix="bench_batch_") as tmp:
        src = Path(tmp) / "rows.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        seconds: dict[str, float] = {}
        same: dict[str, int] = {}  # rows whose output equals the in-process loop's
        task = BatchTask(kind=args.task, **budget)
        in_process(task, rows[:1])  # untimed: imports and the page cache warm for every system
        seconds["in-process"], reference = in_process(task, rows)
        started = time.perf_counter()
        # One local Ray for both pools: 2 actors x 1 thread or 1 x all cores, +1 for reading.
        ray.init(
            num_cpus=cpus + 1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        ray_start = time.perf_counter() - started
        try:
            for workers in (1, 2):
                task = BatchTask(kind=args.task, threads=local_threads(workers), **budget)
                name = f"ray-{workers}"
                out = Path(tmp) / f"{name}.jsonl"
                seconds[name], got = on_ray(task, src, out, workers, args.batch_size)
                same[name] = sum(a == b for a, b in zip(got, reference, strict=True))
        finally:
            ray.shutdown()

    print(
        f"task {args.task}, {args.rows} rows x top-{args.depth}, {cpus} cores, torch "
        f"{torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}, "
        f"ray {ray.__version__} (ray.init {ray_start:.1f} s, excluded)"
    )
    print("| system | workers x threads | seconds | rows/s | vs in-process |")
    print("|---|---|---:|---:|---:|")
    base = args.rows / seconds["in-process"]
    shapes = {
        "in-process": f"1 x {cpus}",
        "ray-1": f"1 x {local_threads(1)}",
        "ray-2": f"2 x {local_threads(2)}",
    }
    for name, secs in seconds.items():
        rate = args.rows / secs
        print(f"| {name} | {shapes[name]} | {secs:.1f} | {rate:.2f} | {rate / base:.2f}x |")
    # Thread counts differ (float sums in another order), so a near-tie may swap; count them.
    print(", ".join(f"{n}: {k}/{args.rows} rows identical to in-process" for n, k in same.items()))


if __name__ == "__main__":
    main()
