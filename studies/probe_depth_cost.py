"""What a document probe's forward costs by proxy and depth, against MiniLM, in one run (issue 27's
Gemma layer-12 lead; BENCHMARKS §2 "Gemma-3-270M beside SmolLM2").

Each variant reads the same distinct DL19 BM25 top-20 lists (the dev lists, documents cut to 128
tokens of each proxy's own tokenizer), with the query-span rows the probes read, in one forward per
list that stops after the given depth. MiniLM scores the same documents (its cache cleared before
every call). Prints seconds per list (median over the lists) and the ratio to MiniLM.

    python studies/probe_depth_cost.py --lists 5 --threads 2 \
        --variants smollm2-135m:30,gemma3-270m:18,gemma3-270m:12
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from ragattn.embed import shared_embedder
from ragattn.lab import rerank_lists as rl
from ragattn.lab.rerank_features import list_units
from ragattn.proxy import load_proxy
from ragattn.rerank.features import dense_local
from ragattn.sentence_attention import attention_block
from ragattn.settings import Settings

CACHE_DIR = Settings.from_env().cache_dir
"""RAGATTN_CACHE_DIR, read here at the edge: where the lab keeps its lists and features."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--lists", type=int, default=5, help="distinct DL19 lists timed per variant")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--variants",
        default="smollm2-135m:30,gemma3-270m:18,gemma3-270m:12",
        help="comma-separated PROXY:DEPTH (the forward stops after layer DEPTH - 1)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("cpu capability:", torch.backends.cpu.get_cpu_capability(), flush=True)
    medians: dict[str, float] = {}
    minilm_lists = None
    for variant in args.variants.split(","):
        name, depth = variant.rsplit(":", 1)
        proxy = load_proxy(name, threads=args.threads)
        lists = rl.cached_lists(
            "dev-top20-128",
            lambda proxy=proxy: rl.dev_lists(args.data, proxy.tokenizer),
            tokenizer=proxy.name,
            cache_dir=CACHE_DIR,
        )
        lists = [r for r in lists if r.source.startswith("dl19")][: args.lists]
        minilm_lists = minilm_lists or lists
        first = lists[0]
        attention_block(proxy, first.query, first.documents, list_units(first), rows="query")
        times = []
        for r in lists:
            t0 = time.perf_counter()
            attention_block(
                proxy, r.query, r.documents, list_units(r), rows="query", layers=int(depth)
            )
            times.append(time.perf_counter() - t0)
        medians[variant] = statistics.median(times)
        print(f"{variant}: {proxy.dtype} " + " ".join(f"{t:.2f}" for t in times), flush=True)
    embedder = shared_embedder()
    assert minilm_lists is not None
    dense_local(minilm_lists[0].query, minilm_lists[0].documents)
    times = []
    for r in minilm_lists:
        embedder.clear_cache()
        t0 = time.perf_counter()
        dense_local(r.query, r.documents)
        times.append(time.perf_counter() - t0)
    medians["minilm"] = statistics.median(times)
    print("minilm: " + " ".join(f"{t:.2f}" for t in times), flush=True)
    print("\n| variant | median s / list | x minilm |\n|---|---|---|")
    for variant, t in medians.items():
        print(f"| {variant} | {t:.2f} | {t / medians['minilm']:.1f}x |")


if __name__ == "__main__":
    main()
