"""Fit and compare document probes on the extracted ranking lists (issue 27), chosen by transfer.

    python studies/rerank_probe_study.py --threads 2 [--limit N] [--curve 100,200,400]

Reads only lists already in the feature store (a partial extraction is fine). Prints, for every
learner: leave-one-source-out nDCG@10 per training source and their macro mean (the choosing
number), then, fitted on all training lists, the msmarco-train transfer check and the dev lists
(DL19 / SciFact test BM25 top-20, shuffled; reported, never used to choose).
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ragattn.lab import rerank_features as rf
from ragattn.lab import rerank_lists as rl
from ragattn.lab import rerank_probe as rp
from ragattn.lab.feature_store import default_root
from ragattn.lab.rerank_card import DEPTH_HELP, store_depth
from ragattn.proxy import load_proxy
from ragattn.settings import Settings

CACHE_DIR = Settings.from_env().cache_dir
"""RAGATTN_CACHE_DIR, read here at the edge: where the lab keeps its lists and features."""


def catalogue(names: list[str]) -> list[rp.Learner]:
    table = {
        "minilm": [rp.minilm_learner()],
        "logreg": [rp.logreg_learner(c) for c in (0.001, 0.01)],
        "logreg+minilm": [rp.logreg_learner(c, with_minilm=True) for c in (0.001, 0.01)],
        "l1": [rp.logreg_learner(c, penalty="l1") for c in (0.002, 0.01)],
        "residual": [rp.residual_learner(l2) for l2 in (1.0, 0.1, 0.01)],
        "lambdamart": [
            rp.lambdamart_learner(leaves=7, trees=100),
            rp.lambdamart_learner(leaves=15, trees=300),
        ],
    }
    return [x for n in names for x in table[n]]


def columns(
    table: rp.ListTable, kinds: str, layers: int | None, only: tuple[int, ...] | None = None
) -> rp.ListTable:
    """The columns of ``kinds`` in layers ``< layers``, and only in the layers ``only`` if given
    (Gemma 3's full-attention layers: its sliding-window layers see 512 tokens back, not every
    document of a 2,600-token list)."""
    chosen = [k for k in kinds.split(",") if k and k != "all"]
    return rp.restrict(table, kinds=chosen, layers=layers, only=only)


def cached_table(name: str, build: Callable[[], rp.ListTable]) -> rp.ListTable:
    """``build()``, pickled under ``~/.cache/ragattn/rerank-tables`` (pooling reads every list's
    sentence split and MiniLM scores: minutes; the table is a function of the store's contents)."""
    folder = Path.home() / ".cache" / "ragattn" / "rerank-tables"
    path = folder / f"{name}.pkl"
    if path.is_file():
        return pickle.loads(path.read_bytes())
    table = build()
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(table))
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--proxy", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=None, help="first N training lists (in order)")
    ap.add_argument("--learners", default="minilm,logreg,logreg+minilm,l1,residual,lambdamart")
    ap.add_argument(
        "--kinds", default="all", help="';'-separated variants of pooled kinds, e.g. all;mass:query"
    )
    ap.add_argument(
        "--layers",
        default="all",
        help="comma-separated: all, a depth N (layers < N), global (full-attention layers only) "
        "or a set of layers such as L5+L11",
    )
    ap.add_argument("--curve", default="", help="training-list counts for a learning curve")
    ap.add_argument(
        "--fresh-from",
        type=int,
        default=0,
        help="fit on the first N lists only and also score the later ones (never fitted on): "
        "fresh_macro is their nDCG@10, macro over sources",
    )
    ap.add_argument("--no-dev", action="store_true")
    ap.add_argument(
        "--dev-every", action="store_true", help="score dev and transfer at every curve point"
    )
    ap.add_argument("--table-cache", action="store_true", help="pickle the pooled tables")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--depth",
        default="recipe",
        help=DEPTH_HELP,
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    proxy = load_proxy(args.proxy, threads=args.threads)
    store = rf.store_for(default_root(CACHE_DIR), proxy, layers=store_depth(args.depth, proxy))
    print("cpu capability:", torch.backends.cpu.get_cpu_capability(), flush=True)
    started = time.perf_counter()
    train_lists = rl.cached_lists(
        "train-128",
        lambda: rl.round_robin(args.data, proxy.tokenizer),
        tokenizer=proxy.name,
        cache_dir=CACHE_DIR,
    )[: args.limit]

    stored = sum(1 for _ in store.folder.rglob("*.npz"))

    def table(name: str, build: Callable[[], rp.ListTable]) -> rp.ListTable:
        # Keyed by the store's configuration and how many lists it holds: a table pooled before
        # the extraction went further (or from another dtype or depth) is never read back.
        key = f"{name}-{proxy.name}-{store.folder.name}-{stored}"
        return cached_table(key, build) if args.table_cache else build()

    train_all = table(
        f"train-{args.limit}",
        lambda: rp.build_table(rf.extract(store, train_lists, cached_only=True, progress=False)),
    )
    transfer_all = table(
        "transfer",
        lambda: rp.build_table(
            rf.extract(
                store,
                rl.cached_lists(
                    "msmarco-128",
                    lambda: list(rl.source_lists("msmarco-train", args.data, proxy.tokenizer)),
                    tokenizer=proxy.name,
                    cache_dir=CACHE_DIR,
                ),
                cached_only=True,
                progress=False,
            )
        ),
    )
    dev_all = (
        rp.ListTable(names=train_all.names, lists=())
        if args.no_dev
        else table(
            "dev",
            lambda: rp.build_table(
                rf.extract(
                    store,
                    rl.cached_lists(
                        "dev-top20-128",
                        lambda: rl.dev_lists(args.data, proxy.tokenizer),
                        tokenizer=proxy.name,
                        cache_dir=CACHE_DIR,
                    ),
                    cached_only=True,
                    progress=False,
                )
            ),
        )
    )
    train = train_all
    counts = {s: sum(r.source == s for r in train.lists) for s in train.sources()}
    print(
        f"training lists: {len(train.lists)} {json.dumps(counts)}; "
        f"transfer {len(transfer_all.lists)}; dev {len(dev_all.lists)}; "
        f"features {len(train.names)}; loaded in {time.perf_counter() - started:.0f}s",
        flush=True,
    )
    results = []
    sizes = [int(x) for x in args.curve.split(",") if x] or [len(train.lists)]
    if args.fresh_from:
        sizes = [args.fresh_from]
    variants = [
        (kinds, layers) for kinds in args.kinds.split(";") for layers in args.layers.split(",")
    ]
    full_layers = proxy.full_attention_layers()
    for (kinds, spec), size in ((v, n) for v in variants for n in sizes):
        explicit = spec.startswith("L")
        layers = int(spec) if spec not in ("", "all", "global") and not explicit else None
        only = full_layers if spec == "global" else None
        if explicit:
            only = tuple(int(x.removeprefix("L")) for x in spec.split("+"))
        train = columns(train_all, kinds, layers, only)
        transfer = columns(transfer_all, kinds, layers, only)
        dev = columns(dev_all, kinds, layers, only)
        print(f"-- kinds={kinds} layers={spec or 'all'} ({len(train.names)} columns)", flush=True)
        sub = rp.ListTable(names=train.names, lists=train.lists[:size])
        for learner in catalogue(args.learners.split(",")):
            t0 = time.perf_counter()
            loso = rp.leave_one_source_out(sub, learner)
            macro = float(np.mean(list(loso.values())))
            row = {
                "kinds": kinds,
                "layers": spec,
                "lists": len(sub.lists),
                "learner": learner.name,
                "loso_macro": macro,
                "loso": loso,
            }
            if size == sizes[-1] or args.dev_every:
                scorer = learner.fit(sub)
                row["msmarco"] = rp.ndcg(scorer, transfer.lists)
                for src in dict.fromkeys(r.source for r in dev.lists):
                    row[src] = rp.ndcg(scorer, [r for r in dev.lists if r.source == src])
                fresh = train.lists[size:]
                if args.fresh_from and fresh:
                    by_source = {
                        src: rp.ndcg(scorer, [r for r in fresh if r.source == src])
                        for src in dict.fromkeys(r.source for r in fresh)
                    }
                    row["fresh_macro"] = float(np.mean(list(by_source.values())))
                    row["fresh"] = by_source
            row["seconds"] = time.perf_counter() - t0
            results.append(row)
            extra = " ".join(
                f"{k}={v:.4f}"
                for k, v in row.items()
                if k
                not in (
                    "kinds",
                    "layers",
                    "lists",
                    "learner",
                    "loso",
                    "loso_macro",
                    "seconds",
                    "fresh",
                )
            )
            per = " ".join(f"{k.split('-')[0]}={v:.3f}" for k, v in loso.items())
            print(
                f"{len(sub.lists):5d} {learner.name:34s} LOSO={macro:.4f} [{per}] {extra} "
                f"({row['seconds']:.0f}s)",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
