"""The HyDE weight curve on held-out sets: DL19 top-20 / top-100, SciFact top-100, obvious cases.

Reported, never used to choose: ``HYDE_WEIGHT`` and the prompt come from the training lists
(``studies/fit_hyde_weight.py``). For each query the proxy writes its answer once (the runtime's
:class:`~ragattn.rerank.hyde.HypotheticalAnswers`, cached on disk in ``--answers``), then every
weight ``w`` scores ``(cos(q, d) + w cos(a, d)) / (1 + w)`` with the packaged MiniLM; ``w = 0`` is
``minilm``. The score is order-free, so the candidates' order does not matter.

    python studies/hyde_sweep.py --threads 2
    python studies/hyde_sweep.py --threads 2 --max-new-tokens 48 \\
        --instruction $'Write a short passage that answers the question.\\nQuestion: '
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from ragattn.embed import shared_embedder
from ragattn.lab.evaluation import datasets
from ragattn.lab.evaluation.metrics import ndcg_at_10

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hyde_answers import add_arguments, answer_all  # noqa: E402

GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5)
# The obvious cases' half for choosing only (tests/data/README.md); the test half stays held back.
CASES = Path(__file__).resolve().parents[1] / "tests" / "data" / "obvious_cases_choose.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    add_arguments(parser)
    args = parser.parse_args()

    d = args.data_dir
    dl19 = datasets.load_candidates(
        d / "trec-dl-2019" / "candidates_bm25_top100.jsonl",
        d / "trec-dl-2019" / "qrels.trec.txt",
        top_k=100,
    )
    scifact = datasets.load_beir(d / "scifact", split="test")
    claims = {q: t for q, t in scifact.queries.items() if q in scifact.qrels}
    scifact_lists = datasets.bm25_candidates(scifact.corpus, claims, k=100)
    cases = json.loads(CASES.read_text())["cases"]

    queries = [q.query for q in dl19.queries] + [q.query for q in scifact_lists]
    cached, written = answer_all(args, queries + [c["query"] for c in cases])
    print(f"{written}; cpu capability {torch.backends.cpu.get_cpu_capability()}")

    embedder = shared_embedder()
    embedder.cache_size = max(embedder.cache_size, 200_000)

    def doc_text(c: datasets.Candidate) -> str:
        return f"{c.title} {c.text}" if c.title else c.text

    print("| set | " + " | ".join(f"w={w}" for w in GRID) + " |")
    print("|---" * (len(GRID) + 1) + "|")
    for name, lists, qrels, depth in (
        ("DL19 top-20", dl19.queries, dl19.qrels, 20),
        ("DL19 top-100", dl19.queries, dl19.qrels, 100),
        ("SciFact top-100", scifact_lists, scifact.qrels, 100),
    ):
        parts = {}
        for item in lists:
            cands = item.candidates[:depth]
            vecs = embedder.encode([item.query, cached[item.query], *map(doc_text, cands)])
            parts[item.qid] = ([c.doc_id for c in cands], vecs[2:] @ vecs[0], vecs[2:] @ vecs[1])
        cells = []
        for w in GRID:
            run = {
                qid: {d: float((a + w * b) / (1 + w)) for d, a, b in zip(*p, strict=True)}
                for qid, p in parts.items()
            }
            cells.append(f"{ndcg_at_10(run, qrels)[0]:.4f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    right = []
    for w in GRID:
        hits = 0
        for c in cases:
            docs = [c["relevant"], *c["distractors"]]
            vecs = embedder.encode([c["query"], cached[c["query"]], *docs])
            hits += int(np.argmax(vecs[2:] @ vecs[0] + w * (vecs[2:] @ vecs[1])) == 0)
        right.append(f"{hits}/{len(cases)}")
    print("| obvious cases right | " + " | ".join(right) + " |")


if __name__ == "__main__":
    main()
