"""Time the MiniLM embedder's batch shapes on DL19 passages and HotpotQA sentences (2 cores).

The embedder encodes every text in a batch whose shape depends on that text alone (so a vector
never depends on its batch mates, see ``ragattn.embed.Embedder._encode``). This compares the
earlier shape (4 texts of one exact token length, filler copies included) with the bucketed one
(lengths rounded up to 8 tokens, ``batch_tokens // bucket`` texts per forward, at most 16), on
distinct inputs with the LRU off, and checks that both give the same vectors to float32 rounding.

    python studies/embed_batching.py --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import Embedder

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _passages(n: int) -> list[list[str]]:
    path = DATA / "trec-dl-2019" / "candidates_bm25_top100.jsonl"
    with path.open() as f:
        rows = [json.loads(line) for line in itertools.islice(f, n)]
    return [[r["query"]] + [c["text"] for c in r["candidates"][:20]] for r in rows]


def _sentences(n: int) -> list[list[str]]:
    data = json.loads((DATA / "hotpotqa" / "hotpot_dev_distractor_v1.shared.json").read_text())
    return [[q["question"]] + [s for _, sents in q["context"] for s in sents] for q in data[:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--inputs", type=int, default=9, help="distinct inputs per set (1 warm-up)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, {args.threads} threads")
    shapes = {
        "4 texts of one exact length (before)": Embedder(
            cache_size=0, batch_size=4, batch_tokens=1 << 20, length_step=1
        ),
        "bucketed, 128 tokens a forward (now)": Embedder(cache_size=0),
    }
    sets = {
        "DL19, query + 20 passages": _passages(args.inputs),
        "HotpotQA, question + its sentences": _sentences(args.inputs),
    }
    print("| input | shape | median s | min s |\n|---|---|---|---|")
    for set_name, inputs in sets.items():
        vectors = []
        for shape_name, embedder in shapes.items():
            embedder.encode(inputs[0])  # warm-up
            times = []
            for texts in inputs[1:]:
                start = time.perf_counter()
                embedder.encode(texts)
                times.append(time.perf_counter() - start)
            vectors.append(np.concatenate([embedder.encode(t) for t in inputs[1:]]))
            print(
                f"| {set_name} | {shape_name} | {statistics.median(times):.3f} | {min(times):.3f} |"
            )
        print(f"max |difference| of the vectors: {np.abs(vectors[0] - vectors[1]).max():.2e}")


if __name__ == "__main__":
    main()
