"""A random sample of the MuSiQue sentence labels, for checking the labelling rule's precision by
hand (BENCHMARKS.md §3, "Document-aware selection": item 3's precision check).

Every positive sentence that ``ragattn.lab.probe_training.MUSIQUE_RULE`` gives on the 100-question
MuSiQue train sample is pooled; ``--n`` of them are drawn with ``--seed`` and printed with their
question, answer and paragraph title. Whether each states what the question needs is judged by a
reader; the script judges nothing.

    python studies/musique_label_sample.py --n 30 --seed 1
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from ragattn.lab.probe_training import MUSIQUE_RULE, _musique_training


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    pool = []
    for ex in _musique_training(args.data):
        for passage in ex.passages:
            for k in passage.supporting:
                start, end = passage.sentence_spans[k]
                pool.append((ex, passage.title, passage.text[start:end]))
    print(
        f"rule: {MUSIQUE_RULE}\n{len(pool)} positive sentences; {args.n} drawn, seed {args.seed}\n"
    )
    for i, (ex, title, sentence) in enumerate(random.Random(args.seed).sample(pool, args.n), 1):
        print(f"{i:2d}. Q: {ex.question}\n    A: {ex.answers[0]}\n    [{title}] {sentence}\n")


if __name__ == "__main__":
    main()
