"""Extract per-head features of retrieval-shaped ranking lists (issue 27), resumable.

    python studies/rerank_probe_extract.py --limit 700 --threads 2
    python studies/rerank_probe_extract.py --dev --threads 2      # DL19 / SciFact dev lists

Lists come from :mod:`ragattn.lab.rerank_lists` (training portions only, round-robin over
sources); features go to the on-disk store, so a rerun resumes where the last one stopped.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ragattn.lab import rerank_features as rf
from ragattn.lab import rerank_lists as rl
from ragattn.lab.feature_store import default_root
from ragattn.lab.rerank_card import DEPTH_HELP, store_depth
from ragattn.proxy import load_proxy
from ragattn.settings import Settings

CACHE_DIR = Settings.from_env().cache_dir
"""RAGATTN_CACHE_DIR, read here at the edge: where the lab keeps its lists and features."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--proxy", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=None, help="first N lists (of any mode)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--dev", action="store_true", help="extract the dev lists instead")
    ap.add_argument("--dev-top-k", type=int, default=20)
    ap.add_argument("--transfer", action="store_true", help="extract msmarco-train lists instead")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--depth",
        default="recipe",
        help=DEPTH_HELP,
    )
    ap.add_argument("--features-cache", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    proxy = load_proxy(args.proxy, threads=args.threads)
    print(
        "cpu capability:",
        torch.backends.cpu.get_cpu_capability(),
        "dtype:",
        proxy.dtype,
        flush=True,
    )
    store = rf.store_for(
        args.features_cache or default_root(CACHE_DIR), proxy, layers=store_depth(args.depth, proxy)
    )
    print("feature store:", store.folder, flush=True)
    if args.dev:
        lists = rl.cached_lists(
            f"dev-top{args.dev_top_k}-{args.max_tokens}",
            lambda: rl.dev_lists(
                args.data, proxy.tokenizer, top_k=args.dev_top_k, max_tokens=args.max_tokens
            ),
            tokenizer=proxy.name,
            cache_dir=CACHE_DIR,
        )
    elif args.transfer:
        lists = rl.cached_lists(
            f"msmarco-{args.max_tokens}",
            lambda: list(
                rl.source_lists(
                    "msmarco-train", args.data, proxy.tokenizer, max_tokens=args.max_tokens
                )
            ),
            tokenizer=proxy.name,
            cache_dir=CACHE_DIR,
        )
    else:
        lists = rl.cached_lists(
            f"train-{args.max_tokens}",
            lambda: rl.round_robin(args.data, proxy.tokenizer, max_tokens=args.max_tokens),
            tokenizer=proxy.name,
            cache_dir=CACHE_DIR,
        )[: args.limit]
    lists = lists[: args.limit]
    counts: dict[str, int] = {}
    for r in lists:
        counts[r.source] = counts.get(r.source, 0) + 1
    print("lists:", len(lists), json.dumps(counts), flush=True)
    n = 0
    for _ in rf.extract(store, lists):
        n += 1
    print("done:", n, flush=True)


if __name__ == "__main__":
    main()
