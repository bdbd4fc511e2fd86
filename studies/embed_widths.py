"""Wider MiniLM batches on 20 fullwiki paragraphs and their sentences (issue 50 item 1's batch
lever; docs/research/context.md, "The read at production shape, measured"): the time of each
batch shape, and that every shape gives the same vectors and a text alone equals it in a batch.

    python studies/embed_widths.py
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import Embedder
from ragattn.sentences import split_sentences

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SHAPES = {
    "128/16": {"batch_tokens": 128, "batch_size": 16},
    "512/32": {"batch_tokens": 512, "batch_size": 32},
    "1024/64": {"batch_tokens": 1024, "batch_size": 64},
    "2048/64": {"batch_tokens": 2048, "batch_size": 64},
}
"""``batch_tokens/batch_size`` shapes; the first is the embedder's default."""


def main() -> None:
    torch.set_num_threads(2)
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, 2 threads")
    records = json.loads((DATA / "hotpotqa" / "hotpot_dev_fullwiki_v1.shared.json").read_text())
    inputs = []
    for q in range(6):
        docs = ["".join(s) for r in records[400 + 2 * q : 402 + 2 * q] for _, s in r["context"]]
        inputs.append((docs, [d[a.start : a.end] for d in docs for a in split_sentences(d)]))
    vectors = {}
    for name, shape in SHAPES.items():
        embedder = Embedder(cache_size=0, **shape)
        embedder.encode(inputs[0][0])
        embedder.encode(inputs[0][1])
        docs_s, sents_s = [], []
        for docs, sents in inputs[1:]:
            start = time.perf_counter()
            vd = embedder.encode(docs)
            docs_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            vs = embedder.encode(sents)
            sents_s.append(time.perf_counter() - start)
        vectors[name] = (vd, vs)
        alone = np.stack([embedder.encode([t])[0] for t in sents[:10]])
        print(
            f"{name}: 20 paragraphs {statistics.median(docs_s):.3f} s, their sentences "
            f"{statistics.median(sents_s):.3f} s (medians of 5); alone equals batched: "
            f"{bool((alone == vs[:10]).all())}"
        )
    first = next(iter(vectors.values()))
    for name, (vd, vs) in vectors.items():
        diff = max(float(np.abs(vd - first[0]).max()), float(np.abs(vs - first[1]).max()))
        print(f"{name}: largest difference from the default shape {diff:.2e}")


if __name__ == "__main__":
    main()
