"""Time MiniLM's batch width (``Embedder(batch_tokens=, batch_size=)``) on 100 fullwiki paragraphs
and on their sentences, LRU off, and check that every width gives the default width's vectors.

The record is docs/research/performance.md, "MiniLM's batch width re-measured".

    python studies/embed_width.py --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import Embedder
from ragattn.lab.evaluation.datasets import fullwiki_paragraph_sets
from ragattn.sentences import split_sentences

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WIDTHS = ((128, 16), (256, 16), (512, 16), (512, 32), (1024, 32), (2048, 64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--inputs", type=int, default=3, help="timed inputs after one warm-up")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"cpu capability {torch.backends.cpu.get_cpu_capability()}, {args.threads} threads")
    fullwiki = args.data_dir / "hotpotqa" / "hotpot_dev_fullwiki_v1.shared.json"
    sets = fullwiki_paragraph_sets(fullwiki, 100, args.inputs + 1, skip=300)
    texts = {
        "paragraphs": [[f"{d.title or ''} {d.text}".strip() for d in docs] for _, docs in sets],
        "sentences": [
            [d.text[s.start : s.end] for d in docs for s in split_sentences(d.text)]
            for _, docs in sets
        ],
    }
    default = Embedder(cache_size=0)
    reference = {name: default.encode(inputs[0], cache=False) for name, inputs in texts.items()}
    print("| batch_tokens, batch_size | " + " | ".join(texts) + " | max abs diff |")
    print("|---|" + "---|" * (len(texts) + 1))
    for batch_tokens, batch_size in WIDTHS:
        embedder = Embedder(cache_size=0, batch_tokens=batch_tokens, batch_size=batch_size)
        cells, diff = [], 0.0
        for name, inputs in texts.items():
            warm = embedder.encode(inputs[0], cache=False)  # the warm-up, checked against 128/16
            diff = max(diff, float(np.abs(warm - reference[name]).max()))
            seconds = []
            for batch in inputs[1:]:
                start = time.perf_counter()
                embedder.encode(batch, cache=False)
                seconds.append(time.perf_counter() - start)
            cells.append(f"{statistics.median(seconds):.2f} s")
        print(f"| {batch_tokens}, {batch_size} | " + " | ".join(cells) + f" | {diff:.1e} |")


if __name__ == "__main__":
    main()
