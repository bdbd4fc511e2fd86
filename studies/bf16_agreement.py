"""fp32 against bf16 for the default compressor (``sentinel``), question by question on HotpotQA.

``dtype="auto"`` runs the proxy in bf16 on a CPU with native bf16 (AVX-512 BF16 or AMX), and the
packaged sentinel probe, fitted on fp32 features, then reads bf16 ones. This measures what that
changes: the packaged proxy is loaded in float32 and in bfloat16, each scores the gold-segmented
sentences of the first ``--n`` HotpotQA distractor dev questions through
``Compressor(method="sentinel").score_units`` (the probe's own dtype check included), and the best
sentences are kept within ``--budget`` of the context's proxy tokens by the evaluation harness's
rule (:func:`ragattn.lab.evaluation.select_by_budget`, as ``ragattn eval compress``). Reported:

- identical: the fraction of questions whose kept sentences are the same in both dtypes;
- Jaccard: the mean |fp32 ∩ bf16| / |fp32 ∪ bf16| of the kept sentences;
- recall: the mean supporting-fact recall at the budget in each dtype, and bf16 - fp32;
- max |dscore|: the largest difference of a keep probability.

On a CPU without native bf16 (torch's capability ``AVX2``, or AVX-512 without BF16) bf16 is
emulated: the agreement holds there too, but its seconds say nothing about a native machine.

    python studies/bf16_agreement.py --n 50 --threads 2 --out bf16_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragattn.compress import Compressor
from ragattn.compress.features import Unit
from ragattn.devices import native_cpu_bf16
from ragattn.lab.evaluation import (
    QAExample,
    count_tokens,
    load_hotpot,
    select_by_budget,
    supporting_fact_recall,
)
from ragattn.proxy import Proxy, load_proxy
from ragattn.types import Document

HOTPOT = "hotpotqa/hotpot_dev_distractor_v1.shared.json"


def select(
    compressor: Compressor, example: QAExample, counts: list[np.ndarray], budget: float
) -> tuple[list[np.ndarray], tuple[tuple[tuple[int, int], ...], ...], float]:
    """Keep scores per passage, the kept spans per passage and the seconds the scoring took."""
    passages = example.passages
    docs = [Document(text=p.text, title=p.title or None) for p in passages]
    units = [Unit(d, a, b) for d, p in enumerate(passages) for a, b in p.sentence_spans]
    started = time.perf_counter()
    flat, _ = compressor.score_units(example.question, docs, units)
    seconds = time.perf_counter() - started
    bounds = np.cumsum([len(p.sentence_spans) for p in passages])[:-1]
    scores = np.split(np.asarray(flat, dtype=np.float64), bounds)
    spans = [p.sentence_spans for p in passages]
    return scores, select_by_budget(scores, spans, counts, budget), seconds


def compare(
    proxies: dict[str, Proxy], examples: tuple[QAExample, ...], budget: float
) -> list[dict[str, Any]]:
    """One row per question: each dtype's recall and seconds, and how the selections agree."""
    compressors = {name: Compressor(p, method="sentinel") for name, p in proxies.items()}
    for compressor in compressors.values():  # first-call costs stay out of the seconds
        compressor.compress("Warm up?", ["A first sentence. A second one."], ratio=0.5)
    tokenizer = proxies["float32"].tokenizer
    rows = []
    for ex in examples:
        counts = [count_tokens(tokenizer, p.sentences) for p in ex.passages]
        gold = [[p.sentence_spans[i] for i in p.supporting] for p in ex.passages]
        row: dict[str, Any] = {"qid": ex.qid}
        picked: dict[str, set[tuple[int, int, int]]] = {}
        scores: dict[str, np.ndarray] = {}
        for name, compressor in compressors.items():
            per_passage, kept, seconds = select(compressor, ex, counts, budget)
            picked[name] = {(d, a, b) for d, spans in enumerate(kept) for a, b in spans}
            scores[name] = np.concatenate(per_passage)
            row[f"recall_{name}"] = supporting_fact_recall(kept, gold)
            row[f"seconds_{name}"] = seconds
        a, b = picked["float32"], picked["bfloat16"]
        row["identical"] = a == b
        row["jaccard"] = len(a & b) / len(a | b) if a | b else 1.0
        row["max_abs_dscore"] = float(np.abs(scores["float32"] - scores["bfloat16"]).max())
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    with_gold = [r for r in rows if r["recall_float32"] is not None]
    recall = {
        name: float(np.mean([r[f"recall_{name}"] for r in with_gold])) if with_gold else None
        for name in ("float32", "bfloat16")
    }
    diff = None if recall["float32"] is None else recall["bfloat16"] - recall["float32"]
    return {
        "questions": len(rows),
        "identical": float(np.mean([r["identical"] for r in rows])),
        "mean_jaccard": float(np.mean([r["jaccard"] for r in rows])),
        "recall_float32": recall["float32"],
        "recall_bfloat16": recall["bfloat16"],
        "recall_diff": diff,
        "max_abs_dscore": max(r["max_abs_dscore"] for r in rows),
        "seconds_float32": float(np.mean([r["seconds_float32"] for r in rows])),
        "seconds_bfloat16": float(np.mean([r["seconds_bfloat16"] for r in rows])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--n", type=int, default=50, help="HotpotQA questions, in file order")
    parser.add_argument("--budget", type=float, default=0.2, help="fraction of tokens kept")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    capability = torch.backends.cpu.get_cpu_capability()
    native = native_cpu_bf16()
    print(f"cpu capability {capability}; native bf16 {native}", flush=True)
    proxies = {
        name: load_proxy("smollm2-135m", dtype=name, threads=args.threads)
        for name in ("float32", "bfloat16")
    }
    examples = load_hotpot(args.data / HOTPOT, args.n)
    rows = compare(proxies, examples, args.budget)
    result = {"cpu_capability": capability, "native_bf16": native, "budget": args.budget}
    result |= summary(rows)
    print(json.dumps(result, indent=2))
    at = f"{args.budget:.0%}"
    print(f"| questions | identical | mean Jaccard | recall@{at} fp32 | bf16 | bf16 - fp32 |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {result['questions']} | {result['identical']:.2f} | {result['mean_jaccard']:.3f} "
        f"| {result['recall_float32']:.3f} | {result['recall_bfloat16']:.3f} "
        f"| {result['recall_diff']:+.3f} |"
    )
    if args.out:
        args.out.write_text(json.dumps({"summary": result, "questions": rows}, indent=2))


if __name__ == "__main__":
    main()
