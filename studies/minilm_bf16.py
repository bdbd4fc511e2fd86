"""MiniLM in bf16: its cost and its ranking against fp32, on DL19 (a measurement, not a default).

The rerank default (`minilm`) and the joint call's ranking both pay MiniLM's pass over the
passages (issue 28's cost target; BENCHMARKS.md §3). The proxy already runs bf16 where the CPU
has it natively; this measures whether MiniLM could do the same. For every DL19 query (43, BM25
top-20 and top-100, candidates as given) it encodes the query and passages with the packaged
MiniLM in fp32 and in a bf16 copy of the same weights, with the LRU off, and reports in one run:

- the median seconds to encode a query with its 20 passages (distinct inputs, both dtypes
  alternating query by query, so drift hits both alike);
- the largest cosine difference between the two, and the share of top-10 lists that agree;
- nDCG@10 of ranking by each (pytrec_eval, trec_eval semantics), top-20 and top-100.

``--set scifact`` runs the same over SciFact's test claims with the harness's BM25 top-100 over
title + abstract (``ragattn eval rerank --beir``'s first stage), each passage read as
``title text`` as the `minilm` reranker reads it.

    python studies/minilm_bf16.py --threads 2
    python studies/minilm_bf16.py --threads 2 --set scifact
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import Embedder
from ragattn.lab.evaluation.datasets import bm25_candidates, load_beir, load_dl19
from ragattn.lab.evaluation.metrics import ndcg_at_10

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _cosines(embedder: Embedder, query: str, texts: list[str]) -> np.ndarray:
    vecs = embedder.encode([query, *texts])
    return np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", choices=("dl19", "scifact"), default="dl19")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, {args.threads} threads")
    fp32 = Embedder(cache_size=0)
    bf16 = Embedder(cache_size=0)
    bf16._model = copy.deepcopy(fp32._model).to(torch.bfloat16)
    encoders = {"float32": fp32, "bfloat16": bf16}
    if args.set == "dl19":
        dl19 = load_dl19(DATA / "trec-dl-2019", top_k=100)
        queries, qrels = dl19.queries, dl19.qrels
    else:
        beir = load_beir(DATA / "scifact", split="test")
        queries, qrels = bm25_candidates(beir.corpus, beir.queries, k=100), beir.qrels
    seconds: dict[str, list[float]] = {name: [] for name in encoders}
    runs: dict[tuple[str, int], dict[str, dict[str, float]]] = {}
    worst, same_top10, lists = 0.0, 0, 0
    for n, q in enumerate(queries):
        texts = [f"{c.title or ''} {c.text}".strip() for c in q.candidates]
        scores = {}
        order = list(encoders) if n % 2 == 0 else list(reversed(encoders))
        for name in order:
            start = time.perf_counter()
            _cosines(encoders[name], q.query, texts[:20])
            seconds[name].append(time.perf_counter() - start)
            scores[name] = _cosines(encoders[name], q.query, texts)
        worst = max(worst, float(np.abs(scores["float32"] - scores["bfloat16"]).max()))
        for k in (20, 100):
            tops = [tuple(np.argsort(-scores[name][:k], kind="stable")[:10]) for name in encoders]
            same_top10 += int(tops[0] == tops[1])
            lists += 1
            for name in encoders:
                runs.setdefault((name, k), {})[q.qid] = {
                    c.doc_id: float(s)
                    for c, s in zip(q.candidates[:k], scores[name][:k], strict=True)
                }
    print(
        f"{len(queries)} queries; largest cosine difference {worst:.4f}; "
        f"top-10 identical in {same_top10} of {lists} lists"
    )
    print(
        "| MiniLM weights | s per query + 20 passages (median) | nDCG@10 top-20 | nDCG@10 top-100 |"
    )
    print("|---|---|---|---|")
    for name in encoders:
        top20, _ = ndcg_at_10(runs[(name, 20)], qrels)
        top100, _ = ndcg_at_10(runs[(name, 100)], qrels)
        print(f"| {name} | {statistics.median(seconds[name]):.3f} | {top20:.4f} | {top100:.4f} |")


if __name__ == "__main__":
    main()
