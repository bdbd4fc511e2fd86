"""Choose the HyDE weight of ``minilm-hyde`` on training lists only.

The lists are the rerank training sources of ``ragattn heads select`` (HotpotQA train sample,
MuSiQue train sample, 2WikiMultihopQA after the evaluation slice, SciFact *train* claims with their
BM25 top-20), ``--per-source`` of each. For each list the proxy writes its answer passage to the
question (the runtime's :class:`~ragattn.rerank.hyde.HypotheticalAnswers`, cached on disk in
``--answers`` so an interrupted run resumes), and every weight ``w`` of the grid scores the
documents ``(cos(q, d) + w cos(a, d)) / (1 + w)``. The table gives nDCG@10 per source and the
macro mean, the training side of the choice of ``HYDE_WEIGHT``. No evaluation set (DL19, SciFact
test, the obvious cases) is read.

    python studies/fit_hyde_weight.py --per-source 50 --threads 2
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import dense_scores
from ragattn.lab.evaluation.metrics import list_ndcg_at_10
from ragattn.lab.rerank_training import load_rerank_training

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hyde_answers import add_arguments, answer_all  # noqa: E402

GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--per-source", type=int, default=50)
    add_arguments(parser)
    args = parser.parse_args()

    lists = load_rerank_training(args.data_dir, args.per_source, scifact=True)
    cached, written = answer_all(args, [ex.query for ex in lists])

    scores: dict[float, dict[str, list[np.ndarray]]] = {w: defaultdict(list) for w in GRID}
    gains: dict[str, list[np.ndarray]] = defaultdict(list)
    for ex in lists:
        texts = [f"{d.title or ''} {d.text}".strip() for d in ex.documents]
        by_query = dense_scores(ex.query, texts)
        answer = cached[ex.query]
        by_answer = dense_scores(answer, texts) if answer else by_query
        gains[ex.source].append(np.asarray(ex.labels))
        for w in GRID:
            scores[w][ex.source].append((by_query + w * by_answer) / (1 + w))
    sources = sorted(gains)
    print(
        f"{len(lists)} training lists ({', '.join(f'{s} {len(gains[s])}' for s in sources)}); "
        f"{written}; "
        f"cpu capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print("| w | " + " | ".join(sources) + " | macro mean |")
    print("|---" * (len(sources) + 2) + "|")
    means = {}
    for w in GRID:
        per = [float(list_ndcg_at_10(scores[w][s], gains[s]).mean()) for s in sources]
        means[w] = float(np.mean(per))
        print(f"| {w} | " + " | ".join(f"{v:.4f}" for v in per) + f" | {means[w]:.4f} |")
    best = max(GRID, key=lambda w: (round(means[w], 6), -w))
    print(f"best weight on training lists: {best} (macro nDCG@10 {means[best]:.4f})")


if __name__ == "__main__":
    main()
