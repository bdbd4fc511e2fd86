"""Rerank methods on the obvious-case suite, each case under 4 input orders.

``tests/data/obvious_cases.json`` holds one relevant document among three same-type distractors
per case. Each method ranks every case with the relevant document at each position; the table
gives the share of trials with the relevant document first, the cases right under every order,
and the order sensitivity: the share of cases whose top document changes with the input order
(0 for order-free methods; listwise attention methods read the documents in one prompt order).

    python studies/obvious_cases.py --threads 2 \
        --method minilm-hyde,minilm,fused-no-attention,icr,fused,qrhead
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ragattn import Reranker, load_proxy

CASES = Path(__file__).resolve().parents[1] / "tests" / "data" / "obvious_cases.json"


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
    args = parser.parse_args()
    cases = json.loads(CASES.read_text())["cases"]
    proxy = load_proxy(threads=args.threads)
    print(
        f"{len(cases)} cases x 4 orders; cpu capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        "| method | relevant first (trials) | cases right under every order "
        "| order-sensitive cases | s / trial |"
    )
    print("|---|---|---|---|---|")
    for method in [m.strip() for m in args.method.split(",") if m.strip()]:
        reranker = Reranker(proxy, method=method)
        hits = right = sensitive = trials = 0
        started = time.perf_counter()
        for case in cases:
            tops = []
            for docs in orders(case["relevant"], case["distractors"]):
                tops.append(docs[reranker.rerank(case["query"], docs, top_n=1)[0].index])
                trials += 1
            hits += sum(t == case["relevant"] for t in tops)
            right += all(t == case["relevant"] for t in tops)
            sensitive += len(set(tops)) > 1
        seconds = (time.perf_counter() - started) / trials
        print(
            f"| {method} | {hits}/{trials} = {hits / trials:.1%} | {right}/{len(cases)} | "
            f"{sensitive}/{len(cases)} | {seconds:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
