"""The compression-probe study: each probe configuration scored by grouped cross-validation on
the training table *and* on the four shared evaluation sets, from features extracted once.

Features come from the on-disk store (:mod:`ragattn.lab.feature_store`): the first run extracts
the training material (``ragattn.lab.probe_training.load_training``) and the evaluation sets, every
later run only fits. Evaluation sets (never trained on): 2Wiki dev first 200, HotpotQA distractor
dev (52), SciFact test rationales (91 claims), SQuAD v2 first 100 answerable questions.

    python studies/probe_study.py --stage all --out study.json
    python studies/probe_study.py --stage extract      # features only (resumable)

Recall is supporting-sentence recall at 20 % of context tokens (33 % for SQuAD, one short passage
each), the metric of BENCHMARKS.md §3.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ragattn.compress.probe import Probe
from ragattn.lab.evaluation import datasets, harness
from ragattn.lab.evaluation.systems import FeatureCache, ProbeSystem
from ragattn.lab.feature_store import FeatureStore, default_root
from ragattn.lab.probe_fit import ProbeConfig, cv_r_precision, extract, train
from ragattn.lab.probe_training import load_training
from ragattn.proxy import Proxy, load_proxy
from ragattn.settings import Settings

CACHE_DIR = Settings.from_env().cache_dir
"""RAGATTN_CACHE_DIR, read here at the edge: where the lab keeps its lists and features."""

EVAL_SETS = {
    "2wiki": (
        lambda d: datasets.load_2wiki(d / "2wikimultihopqa/2wiki_dev_sample500.json", 200),
        0.2,
    ),
    "hotpotqa": (
        lambda d: datasets.load_hotpot(d / "hotpotqa/hotpot_dev_distractor_v1.shared.json", 60),
        0.2,
    ),
    "scifact": (lambda d: datasets.load_scifact_rationales(d / "scifact", "test", 100), 0.2),
    "squad": (lambda d: datasets.load_squad(d / "squad-v2/dev-v2.0.shared.json", 100), 0.33),
}


def eval_caches(
    proxy: Proxy, store: FeatureStore, data: Path
) -> dict[str, tuple[Sequence[datasets.QAExample], FeatureCache, float]]:
    return {
        name: (load(data), FeatureCache(proxy, store, source=f"eval-{name}"), budget)
        for name, (load, budget) in EVAL_SETS.items()
    }


def warm(caches: dict, progress: bool = True) -> dict[str, float]:
    """Extract (or read) every evaluation example's features; seconds per question extracted."""
    from tqdm import tqdm

    out = {}
    for name, (examples, cache, _) in caches.items():
        started = time.perf_counter()
        for ex in tqdm(examples, desc=f"eval {name}", unit="q", disable=not progress):
            cache.get(ex.question, ex.passages)
        out[name] = (time.perf_counter() - started) / len(examples)
    return out


def evaluate(probe: Probe, caches: dict, tokenizer) -> dict[str, float]:
    out = {}
    for name, (examples, cache, budget) in caches.items():
        report = harness.evaluate_selection(
            examples, {"p": ProbeSystem(cache, "", probe=probe)}, (budget,), tokenizer=tokenizer
        )
        out[name] = float(report.rows[0].recall[0] or 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--proxy", default="smollm2-135m")
    parser.add_argument("--stage", choices=["extract", "all"], default="all")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--configs", default="grid", help="grid or a JSON list of ProbeConfig")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cached-only", action="store_true", help="Study only the examples already extracted."
    )
    parser.add_argument(
        "--train-limit",
        type=int,
        default=None,
        help="Use only the first N training questions (the list is interleaved, so balanced).",
    )
    parser.add_argument(
        "--eval-sets", default=",".join(EVAL_SETS), help="Comma-separated evaluation sets."
    )
    args = parser.parse_args()
    print("cpu capability", torch.backends.cpu.get_cpu_capability(), flush=True)
    proxy = load_proxy(args.proxy, threads=2)
    store = FeatureStore(default_root(CACHE_DIR), proxy)
    examples = load_training(args.data)[: args.train_limit]
    table, stats = extract(store, examples, cached_only=args.cached_only)
    print("training", asdict(stats), "s/q", stats.seconds_per_question, table.x.shape, flush=True)
    wanted = [n.strip() for n in args.eval_sets.split(",") if n.strip()]
    caches = {k: v for k, v in eval_caches(proxy, store, args.data).items() if k in wanted}
    if not args.cached_only:
        print("eval s/q", warm(caches), flush=True)
    if args.stage == "extract":
        return
    dtype = str(proxy.dtype).removeprefix("torch.")
    configs = (
        grid() if args.configs == "grid" else [ProbeConfig(**c) for c in json.loads(args.configs)]
    )
    results = []
    for config in configs:
        started = time.perf_counter()
        cv = cv_r_precision(table, config, folds=args.folds)
        probe = train(table, config, dtype=dtype)
        scores = evaluate(probe, caches, proxy.tokenizer)
        row = {
            **asdict(config),
            "cv_rprec": cv,
            **scores,
            "mean4": float(np.mean(list(scores.values()))),
        }
        row["seconds"] = time.perf_counter() - started
        results.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))


def grid() -> list[ProbeConfig]:
    """Staged comparisons: the lexical probe, then attention rows, head pooling, depth, learner."""
    lexical = ProbeConfig(attention=False, lexical=True, dense=True)
    fused = ProbeConfig(attention=True, lexical=True, dense=True, normalise="both", pool="layer")
    sentinel = replace(fused, lexical=False, dense=False)
    out = [lexical, replace(lexical, normalise="both")]
    out += [replace(fused, rows=rows) for rows in ("last", "query", "both")]
    out += [replace(fused, rows="both", layers=layers) for layers in (6, 10, 14, 18, 24)]
    out += [
        replace(fused, rows="last", pool="none", c=0.01),
        replace(fused, rows="both", normalise="zscore"),
        replace(fused, rows="both", c=0.01),
        replace(fused, rows="both", learner="trees"),
        replace(lexical, normalise="both", learner="trees"),
        replace(sentinel, rows="both"),
    ]
    return out


if __name__ == "__main__":
    main()
