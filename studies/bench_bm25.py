"""BM25 backends (bm25s vs rank_bm25) and hybrid latency on SciFact and a 100,000-passage corpus.

The 100k corpus: every SciFact abstract (``corpus_sentences.jsonl``) is cut into passages of
``--sentences`` consecutive sentences (stride = size, title kept); the resulting unique passages
are repeated in order with ids suffixed ``~c<copy>`` until exactly ``--passages`` exist. Term
statistics and posting-list lengths therefore scale like a real 100k corpus, with SciFact's
(smaller) vocabulary.

Dense vectors for the 100k corpus: by default each passage takes its source abstract's MiniLM
vector from a built SciFact index (``--scifact-index``) plus small seeded Gaussian noise
(sigma ``--noise`` per dimension), renormalised, so copies are distinct points for HNSW.
Embedding 100k passages on 2 shared cores takes far longer than this benchmark should;
``--embed`` embeds the unique passages for real instead. Query latency (what is measured at
100k) includes encoding each query with the real MiniLM either way.

    python studies/bench_bm25.py --scifact-index /tmp/ragattn_scifact_idx
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ragattn.retrieve.bm25 import Analyzer, BM25Retriever
from ragattn.retrieve.corpus import indexable_text, read_corpus
from ragattn.retrieve.dense import DenseRetriever
from ragattn.retrieve.hybrid import HybridRetriever
from ragattn.types import Document

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def make_passages(data: Path, total: int, sentences: int) -> tuple[list[Document], list[str]]:
    """The 100k corpus and, per passage, the id of the abstract it was cut from."""
    unique: list[tuple[Document, str]] = []
    with (data / "corpus_sentences.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            sents = rec["sentences"]
            for j in range(0, len(sents), sentences):
                text = " ".join(s.strip() for s in sents[j : j + sentences])
                doc = Document(
                    id=f"{rec['_id']}-p{j // sentences}", title=rec["title"] or None, text=text
                )
                unique.append((doc, rec["_id"]))
    docs, sources = [], []
    for n in range(total):
        doc, source = unique[n % len(unique)]
        copy = n // len(unique)
        docs.append(Document(id=f"{doc.id}~c{copy}", title=doc.title, text=doc.text))
        sources.append(source)
    return docs, sources


def latencies(fn: Callable[[str], object], queries: Sequence[str]) -> dict[str, float]:
    """Per-query wall and CPU time in milliseconds: p50, p95, mean, CPU p50, number of queries.

    CPU time (this process, all threads) is what a query costs on an idle machine; wall time on
    a shared machine adds the time spent waiting for a core.
    """
    fn(queries[0])  # warm caches (stemmer, faiss, torch) outside the timed loop
    times, cpu = [], []
    for q in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(q)
        times.append(1000 * (time.perf_counter() - start))
        cpu.append(1000 * (time.process_time() - start_cpu))
    times.sort()
    return {
        "p50_cpu_ms": statistics.median(cpu),
        "p50_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(0.95 * len(times)))],
        "mean_ms": statistics.fmean(times),
        "queries": len(times),
    }


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def vectors_for(
    docs: list[Document], sources: list[str], args: argparse.Namespace
) -> tuple[np.ndarray, str]:
    from ragattn.embed import shared_embedder

    if args.embed:
        uniq: dict[str, int] = {}
        rows = [uniq.setdefault(indexable_text(d), len(uniq)) for d in docs]
        vecs = shared_embedder().encode(list(uniq), show_progress=True)
        return vecs[rows], f"MiniLM embeddings of the {len(uniq)} unique passages"
    import faiss

    manifest = json.loads((args.scifact_index / "manifest.json").read_text())
    index = faiss.read_index(str(args.scifact_index / "dense.faiss"))
    base = index.reconstruct_n(0, index.ntotal)
    ids = [json.loads(line)["id"] for line in (args.scifact_index / "documents.jsonl").open()]
    if not manifest["documents"] == len(ids) == len(base):
        raise SystemExit(f"{args.scifact_index} is inconsistent; rebuild it with retrieval_eval.py")
    row = {doc_id: i for i, doc_id in enumerate(ids)}
    rng = np.random.default_rng(0)
    vecs = base[[row[s] for s in sources]] + rng.normal(
        0, args.noise, (len(docs), base.shape[1])
    ).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(
        np.float32
    ), f"source-abstract MiniLM vector + N(0, {args.noise}^2) noise, renormalised"


def bench_corpus(
    name: str, docs: list[Document], queries: list[str], args: argparse.Namespace
) -> tuple[list[dict], dict[str, BM25Retriever]]:
    """Build both BM25 backends over ``docs`` and time their build and top-100 queries."""
    analyzer = Analyzer()
    _, tok_s = timed(lambda: [analyzer.tokenize(indexable_text(d)) for d in docs])
    rows: list[dict] = []
    retrievers: dict[str, BM25Retriever] = {}
    for backend in ("bm25s", "rank_bm25"):
        retriever, build_s = timed(lambda b=backend: BM25Retriever(docs, backend=b))  # type: ignore[misc]
        retrievers[backend] = retriever
        qs = queries if backend == "bm25s" else queries[: args.slow_queries]
        lat = latencies(lambda q, r=retriever: r.search(q, 100), qs)  # type: ignore[misc]
        rows.append(
            {
                "corpus": name,
                "docs": len(docs),
                "system": f"BM25 {backend}",
                "build_s": build_s,
                **lat,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    overlap = statistics.fmean(
        len(
            {h.doc_id for h in retrievers["bm25s"].search(q, 10)}
            & {h.doc_id for h in retrievers["rank_bm25"].search(q, 10)}
        )
        / 10
        for q in queries[: args.slow_queries]
    )
    rows[-1]["top10_overlap_with_bm25s"] = overlap
    rows[0]["tokenize_s"] = tok_s
    return rows, retrievers


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument("--passages", type=int, default=100_000, help="size of the large corpus")
    parser.add_argument("--sentences", type=int, default=3, help="sentences per passage")
    parser.add_argument("--queries", type=int, default=200, help="SciFact claims used as queries")
    parser.add_argument("--slow-queries", type=int, default=30, help="queries for rank_bm25 (slow)")
    parser.add_argument("--scifact-index", type=Path, default=Path("/tmp/ragattn_scifact_idx"))
    parser.add_argument(
        "--embed", action="store_true", help="embed the unique 100k passages for real"
    )
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension noise sigma")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense/hybrid rows")
    parser.add_argument(
        "--query-threads",
        type=int,
        default=1,
        help="torch/faiss threads while timing dense and hybrid queries (serving setting)",
    )
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    from ragattn.embed import shared_embedder

    # Every timed query encodes its text afresh: the embedder's LRU would otherwise serve the
    # hybrid rows the vectors the dense rows computed for the same queries.
    shared_embedder().cache_size = 0

    with (args.data / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh][: args.queries]
    scifact = list(read_corpus(args.data / "corpus.jsonl").documents)
    rows, _ = bench_corpus("SciFact", scifact, queries, args)
    big, sources = make_passages(args.data, args.passages, args.sentences)
    big_rows, bm25 = bench_corpus(f"{args.passages:,} passages", big, queries, args)
    rows += big_rows
    note = ""
    if not args.no_dense:
        vecs, note = vectors_for(big, sources, args)
        dense, build_s = timed(lambda: DenseRetriever(big, vectors=vecs))
        # One intra-op thread per query: a 20-token query gains nothing from a second thread,
        # and on a busy machine OpenMP barriers across 2 threads multiply its latency.
        import faiss
        import torch

        torch.set_num_threads(args.query_threads)
        faiss.omp_set_num_threads(args.query_threads)
        rows.append(
            {
                "corpus": rows[-1]["corpus"],
                "docs": len(big),
                "system": f"dense ({dense.kind})",
                "build_s": build_s,
                **latencies(lambda q: dense.search(q, 100), queries),
            }
        )
        for backend in ("bm25s", "rank_bm25"):
            hybrid = HybridRetriever({"bm25": bm25[backend], "dense": dense}, depth=100)
            qs = queries if backend == "bm25s" else queries[: args.slow_queries]
            rows.append(
                {
                    "corpus": rows[-1]["corpus"],
                    "docs": len(big),
                    "system": f"hybrid RRF (BM25 {backend} + dense)",
                    "build_s": float("nan"),
                    **latencies(lambda q, h=hybrid: h.search(q, 10), qs),
                }
            )
    print(
        "\n| corpus | docs | system | build s | p50 ms/query | p95 ms | p50 CPU ms | queries |"
        "\n|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['corpus']} | {r['docs']:,} | {r['system']} | {r['build_s']:.2f} | "
            f"{r['p50_ms']:.1f} | "
            f"{r['p95_ms']:.1f} | {r['p50_cpu_ms']:.1f} | {r['queries']} |"
        )
    print(f"dense/hybrid queries timed with {args.query_threads} torch/faiss thread(s)")
    for r in rows:
        if "top10_overlap_with_bm25s" in r:
            print(
                f"{r['corpus']}: rank_bm25 top-10 overlap with bm25s = "
                f"{r['top10_overlap_with_bm25s']:.3f}"
            )
        if "tokenize_s" in r:
            print(
                f"{r['corpus']}: shared tokenisation alone {r['tokenize_s']:.2f} s "
                "(inside both build times)"
            )
    if note:
        print(f"100k dense vectors: {note}")
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
