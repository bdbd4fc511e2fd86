"""Rerank methods on the obvious-case suite, each case under every input order.

Each case holds one relevant document among same-type distractors (``tests/data/README.md``).
``--split`` picks the file: ``choose`` (the default: the half that studies may choose on),
``test`` (the held-back half the test asserts on), ``new`` (the cases written after the choice),
or ``all``. Each method ranks every case with the relevant document at each position (one order
per position: 4 for 3 distractors); the table gives the share of trials with the relevant document
first, the cases right under every order, and the order sensitivity: the share of cases whose top
document changes with the input order (0 for order-free methods; listwise attention methods read
the documents in one prompt order).

    python studies/obvious_cases.py --threads 2 --split choose \
        --method minilm-hyde,minilm,fused-no-attention,icr,fused,qrhead
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ragattn import Reranker, load_proxy

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SPLITS = {name: DATA / f"obvious_cases_{name}.json" for name in ("choose", "test", "new")}
CASES = SPLITS["choose"]
"""What studies read: the half used for choosing, never the test half or the new cases."""


def load_cases(split: str = "choose") -> list[dict]:
    """The cases of one split (``choose``, ``test``, ``new``) or of all three (``all``)."""
    names = list(SPLITS) if split == "all" else [split]
    return [case for name in names for case in json.loads(SPLITS[name].read_text())["cases"]]


def orders(relevant: str, distractors: list[str]) -> list[list[str]]:
    out = []
    for pos in range(len(distractors) + 1):
        rest = distractors[pos:] + distractors[:pos]
        out.append(rest[:pos] + [relevant] + rest[pos:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--method", default="minilm-hyde,minilm,fused-no-attention,icr,fused,qrhead"
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--proxy", default="smollm2-135m", help="proxy name or path")
    parser.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        default="choose",
        help="which cases: the half for choosing (default), the held-back test half, the new "
        "cases, or all",
    )
    parser.add_argument(
        "--show-misses",
        action="store_true",
        help="after each row, the cases not right under every order",
    )
    args = parser.parse_args()
    cases = load_cases(args.split)
    proxy = load_proxy(args.proxy, threads=args.threads)
    n_orders = sum(len(c["distractors"]) + 1 for c in cases)
    print(
        f"split {args.split}: {len(cases)} cases, {n_orders} orders (the relevant document at "
        f"each position); proxy {proxy.name}, cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        "| method | relevant first (trials) | cases right under every order "
        "| order-sensitive cases | s / trial |"
    )
    print("|---|---|---|---|---|")
    for method in [m.strip() for m in args.method.split(",") if m.strip()]:
        reranker = Reranker(proxy, method=method)
        hits = right = sensitive = trials = 0
        misses: list[str] = []
        started = time.perf_counter()
        for case in cases:
            tops = []
            for docs in orders(case["relevant"], case["distractors"]):
                tops.append(docs[reranker.rerank(case["query"], docs, top_n=1)[0].index])
                trials += 1
            hits += sum(t == case["relevant"] for t in tops)
            right += all(t == case["relevant"] for t in tops)
            sensitive += len(set(tops)) > 1
            misses += [
                f"  {case.get('id', '?')} {case['query']!r} -> {top!r}"
                for top in sorted(set(tops))
                if top != case["relevant"]
            ]
        seconds = (time.perf_counter() - started) / trials
        print(
            f"| {method} | {hits}/{trials} = {hits / trials:.1%} | {right}/{len(cases)} | "
            f"{sensitive}/{len(cases)} | {seconds:.3f} |",
            flush=True,
        )
        if args.show_misses:
            print("\n".join(misses), flush=True)


if __name__ == "__main__":
    main()
