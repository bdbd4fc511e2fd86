"""SciFact retrieval evaluation: recall@100 and nDCG@10 for BM25, dense and hybrid (RRF).

Builds (or reuses, with ``--index``) a ``ragattn`` index over the full SciFact corpus and scores
the queries that the chosen qrels file holds, with trec_eval semantics through ``ir-measures``
(``nDCG@10`` = ``ndcg_cut.10``, ``R@100`` = ``recall.100``). Runs are handed to the evaluator with
score ``1 / rank`` so trec_eval's own tie-breaking (by doc id) cannot reorder our ranking.

The hybrid weight sweep is fitted on the *train* qrels (809 claims) and only the chosen weights
are reported on test, so the headline hybrid number is not tuned on test.

    python studies/retrieval_eval.py --index /tmp/scifact-idx
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Mapping
from pathlib import Path

from ragattn.retrieve.corpus import Hit
from ragattn.retrieve.hybrid import rrf_fuse
from ragattn.retrieve.index import Index

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
SWEEP = ((1.0, 0.5), (1.0, 1.0), (1.0, 1.5), (1.0, 2.0), (0.5, 1.0))


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)  # header
        for qid, doc_id, score in rows:
            qrels.setdefault(qid, {})[doc_id] = int(score)
    return qrels


def read_queries(path: Path, wanted: set[str]) -> dict[str, str]:
    out = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["_id"] in wanted:
                out[record["_id"]] = record["text"]
    return out


def as_run(results: Mapping[str, list[Hit]]) -> dict[str, dict[str, float]]:
    return {qid: {h.doc_id: 1.0 / h.rank for h in hits} for qid, hits in results.items()}


def evaluate(
    qrels: dict[str, dict[str, int]], results: Mapping[str, list[Hit]]
) -> dict[str, float]:
    import ir_measures
    from ir_measures import R, nDCG

    agg = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, as_run(results))
    return {"ndcg@10": agg[nDCG @ 10], "recall@100": agg[R @ 100]}


def retrieve_all(
    index: Index, queries: Mapping[str, str], depth: int
) -> dict[str, dict[str, list[Hit]]]:
    """Top-``depth`` BM25 and dense hits per query (hybrid is fused from these offline)."""
    out: dict[str, dict[str, list[Hit]]] = {"bm25": {}, "dense": {}}
    for qid, text in queries.items():
        out["bm25"][qid] = index.search(text, depth, mode="bm25")
        out["dense"][qid] = index.search(text, depth, mode="dense")
    return out


def fuse(
    runs: dict[str, dict[str, list[Hit]]], weights: tuple[float, float], k_rrf: float, k: int
) -> dict[str, list[Hit]]:
    w = {"bm25": weights[0], "dense": weights[1]}
    return {
        qid: rrf_fuse(
            {"bm25": runs["bm25"][qid], "dense": runs["dense"][qid]}, weights=w, k_rrf=k_rrf
        )[:k]
        for qid in runs["bm25"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument(
        "--index", type=Path, default=None, help="reuse (or build into) this index dir"
    )
    parser.add_argument("--rebuild", action="store_true", help="build even if --index exists")
    parser.add_argument("--bm25-backend", default="bm25s", choices=["bm25s", "rank_bm25"])
    parser.add_argument("--k-rrf", type=float, default=60.0)
    parser.add_argument("--depth", type=int, default=100, help="hits per retriever before fusion")
    parser.add_argument("--no-sweep", action="store_true", help="skip the train-split weight sweep")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()

    index_dir = args.index or Path("/tmp/ragattn_scifact_idx")
    if args.rebuild or not (index_dir / "manifest.json").exists():
        start = time.perf_counter()
        index = Index.build(
            args.data / "corpus.jsonl",
            index_dir,
            bm25_backend=args.bm25_backend,
            show_progress=True,
        )
        print(
            f"built {index_dir} in {time.perf_counter() - start:.1f} s: "
            f"{index.manifest.build_seconds}"
        )
    else:
        index = Index.load(index_dir)
    if index.manifest.bm25["backend"] != args.bm25_backend:
        parser.error(
            f"index uses {index.manifest.bm25['backend']}; pass --rebuild to change backend"
        )

    report: dict[str, object] = {"index": index.manifest.to_dict()}
    weights = (1.0, 1.0)
    if not args.no_sweep:
        train_qrels = read_qrels(args.data / "qrels" / "train.tsv")
        train_runs = retrieve_all(
            index, read_queries(args.data / "queries.jsonl", set(train_qrels)), args.depth
        )
        sweep = {w: evaluate(train_qrels, fuse(train_runs, w, args.k_rrf, 100)) for w in SWEEP}
        weights = max(sweep, key=lambda w: sweep[w]["ndcg@10"])
        print(
            f"\nhybrid weight sweep on train ({len(train_qrels)} queries), k_rrf={args.k_rrf:g}\n"
        )
        print("| w_bm25 | w_dense | nDCG@10 | R@100 |\n|---|---|---|---|")
        for w, m in sweep.items():
            print(f"| {w[0]:g} | {w[1]:g} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
        report["train_sweep"] = [{"weights": list(w), **m} for w, m in sweep.items()]

    qrels = read_qrels(args.data / "qrels" / "test.tsv")
    queries = read_queries(args.data / "queries.jsonl", set(qrels))
    start = time.perf_counter()
    runs = retrieve_all(index, queries, args.depth)
    seconds = time.perf_counter() - start
    rows = {
        f"BM25 ({args.bm25_backend})": evaluate(qrels, runs["bm25"]),
        "dense (MiniLM, FAISS exact)": evaluate(qrels, runs["dense"]),
        "hybrid RRF 1:1": evaluate(qrels, fuse(runs, (1.0, 1.0), args.k_rrf, 100)),
    }
    if weights != (1.0, 1.0):
        rows[f"hybrid RRF {weights[0]:g}:{weights[1]:g} (train-chosen)"] = evaluate(
            qrels, fuse(runs, weights, args.k_rrf, 100)
        )
    print(
        f"\nSciFact test: {len(queries)} queries, {len(qrels)} in qrels, "
        f"{index.manifest.documents} docs; "
        f"BM25+dense retrieval {1000 * seconds / len(queries):.1f} ms/query\n"
    )
    print("| system | nDCG@10 | R@100 |\n|---|---|---|")
    for name, m in rows.items():
        print(f"| {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    report["test"] = rows
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
