"""The cost of the one read for 10-50 candidates, each read configuration against the two-pass
pipeline, in one run (issue 43 item 4; the rule is in BENCHMARKS.md §0).

Candidates are HotpotQA fullwiki paragraphs (about 128 proxy tokens each): a query reads the
paragraphs of ``n / 10`` consecutive questions, with the first one's question, so every query
meets passages no other query read. For each query every configuration runs once, in turn,
with MiniLM's embedding LRU cleared before each call (cold, distinct inputs); the medians over
the queries are printed with the CPU capability and the threads:

- ``<read>``: ``Compressor(cascade=...).rerank_and_compress(query, candidates, ratio=0.2)``;
- ``two-pass``: ``Reranker()`` (MiniLM) over every candidate, then ``Compressor().compress`` of
  the best five at ratio 0.5 (the pipeline's ``flow="two_pass"`` defaults).

    python studies/read_cost.py --threads 2 --candidates 20 --queries 10
    python studies/read_cost.py --threads 2 --candidates 10 --candidates 50 --queries 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ragattn.compress import Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.embed import shared_embedder
from ragattn.lab.evaluation.datasets import fullwiki_paragraph_sets
from ragattn.lab.timing import runtime_info, runtime_line
from ragattn.proxy import load_proxy
from ragattn.rerank import Reranker
from ragattn.types import Document

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FULLWIKI = DATA / "hotpotqa" / "hotpot_dev_fullwiki_v1.shared.json"

READS: dict[str, Cascade | None] = {
    "all": None,
    "share-0.8": DEFAULT_CASCADE,
    "cap-1024": Cascade.parse("0.8:lexical+links@1024", min_room=1.5),
    "cap-768": Cascade.parse("0.8:lexical+links@768", min_room=1.5),
    "cap-512": Cascade.parse("0.8:lexical+links@512", min_room=1.5),
    "docs-768": Cascade.parse("0.8:documents@768", min_room=1.5),
}
"""The read configurations of the rule in BENCHMARKS.md §0, by name."""


def queries(n_candidates: int, n_queries: int, skip: int) -> list[tuple[str, list[Document]]]:
    """``n_queries`` (question, candidates) pairs of ``n_candidates`` distinct paragraphs."""
    return fullwiki_paragraph_sets(FULLWIKI, n_candidates, n_queries, skip)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--candidates", type=int, action="append")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--read", action="append", choices=sorted(READS))
    args = parser.parse_args()
    proxy = load_proxy("smollm2-135m", threads=args.threads)
    print(runtime_line(runtime_info(proxy)))
    names = args.read or list(READS)
    compressors = {name: Compressor(proxy, cascade=READS[name]) for name in names}
    reranker, two_pass = Reranker(proxy), Compressor(proxy)
    embedder = shared_embedder()

    def timed(call: Callable[[], object]) -> float:
        embedder.clear_cache()
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    skip = 0
    for n in args.candidates or [20]:
        pairs = queries(n, args.queries + 1, skip)
        skip += len(pairs) * -(-n // 10)
        seconds: dict[str, list[float]] = {name: [] for name in [*names, "two-pass"]}
        for k, (query, docs) in enumerate(pairs):
            tokens = sum(len(proxy.tokenizer(d.text)["input_ids"]) for d in docs)
            row = {}
            for name, comp in compressors.items():

                def read(c: Compressor = comp, q: str = query, d: list[Document] = docs) -> object:
                    return c.rerank_and_compress(q, d, ratio=0.2)

                row[name] = timed(read)

            def passes(q: str = query, d: list[Document] = docs) -> object:
                best = [r.document for r in reranker.rerank(q, d, top_n=5)]
                return two_pass.compress(q, best, ratio=0.5)

            row["two-pass"] = timed(passes)
            if k == 0:
                continue  # the first query warms every path up
            for name, value in row.items():
                seconds[name].append(value)
            print(
                f"  {n} candidates, {tokens} tokens: "
                + ", ".join(f"{name} {value:.2f}" for name, value in row.items()),
                flush=True,
            )
        base = statistics.median(seconds["two-pass"])
        print(f"\n{n} candidates, {args.queries} queries, median seconds (x two-pass):")
        print("| read | s | x two-pass |\n|---|---|---|")
        for name, values in seconds.items():
            median = statistics.median(values)
            print(f"| {name} | {median:.2f} | {median / base:.2f}x |")
        print(flush=True)


if __name__ == "__main__":
    main()
